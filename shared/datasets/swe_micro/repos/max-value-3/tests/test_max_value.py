from extremes import max_value


def test_unsorted():
    assert max_value([3, 9, 2]) == 9


def test_negatives():
    assert max_value([-5, -2, -9]) == -2


def test_single():
    assert max_value([7]) == 7
