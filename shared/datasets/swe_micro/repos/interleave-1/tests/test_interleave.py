from zipper import interleave


def test_same_length():
    assert interleave([1, 2, 3], [4, 5, 6]) == [1, 4, 2, 5, 3, 6]


def test_both_empty():
    assert interleave([], []) == []


def test_zeros():
    assert interleave([0], [0]) == [0, 0]
