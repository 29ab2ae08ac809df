from negatives import count_negative


def test_empty():
    assert count_negative([]) == 0


def test_none():
    assert count_negative([1, 2]) == 0


def test_all():
    assert count_negative([-1, -2]) == 2


def test_fraction():
    assert count_negative([-0.5, 2]) == 1


def test_mixed():
    assert count_negative([-1, -1, 5, -7]) == 3


def test_single():
    assert count_negative([-9]) == 1
