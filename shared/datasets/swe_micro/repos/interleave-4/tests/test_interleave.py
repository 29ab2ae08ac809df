from zipper import interleave


def test_both_empty():
    assert interleave([], []) == []


def test_one_empty():
    assert interleave([1], []) == [1]
    assert interleave([], ["x"]) == ["x"]


def test_zeros():
    assert interleave([0], [0]) == [0, 0]
