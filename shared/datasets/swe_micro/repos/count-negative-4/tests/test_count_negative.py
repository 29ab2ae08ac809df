from negatives import count_negative


def test_none():
    assert count_negative([1, 2]) == 0


def test_zero_is_not_negative():
    assert count_negative([0]) == 0
    assert count_negative([-3, 0, 3]) == 1


def test_fraction():
    assert count_negative([-0.5, 2]) == 1


def test_single():
    assert count_negative([-9]) == 1
