from zipper import interleave


def test_same_length():
    assert interleave([1, 2, 3], [4, 5, 6]) == [1, 4, 2, 5, 3, 6]


def test_both_empty():
    assert interleave([], []) == []


def test_first_longer():
    assert interleave([1, 2, 3], ["a"]) == [1, "a", 2, 3]


def test_zeros():
    assert interleave([0], [0]) == [0, 0]


def test_two_and_one():
    assert interleave([7, 8], [9]) == [7, 9, 8]
