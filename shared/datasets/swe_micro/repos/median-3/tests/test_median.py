from middles import median


def test_odd():
    assert median([3, 1, 2]) == 2


def test_single():
    assert median([5]) == 5


def test_pair():
    assert median([10, 20]) == 15


def test_five():
    assert median([7, 1, 9, 3, 5]) == 5


def test_negatives():
    assert median([-1, -3, -2]) == -2
