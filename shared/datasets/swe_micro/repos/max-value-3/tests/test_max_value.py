from extremes import max_value


def test_unsorted():
    assert max_value([3, 9, 2]) == 9


def test_negatives():
    assert max_value([-5, -2, -9]) == -2


def test_single():
    assert max_value([7]) == 7


def test_duplicates():
    assert max_value([4, 4, 1]) == 4


def test_last_largest():
    assert max_value([1, 2, 8]) == 8


def test_two_negatives():
    assert max_value([-10, -7]) == -7
