from middles import median


def test_single():
    assert median([5]) == 5


def test_pair():
    assert median([10, 20]) == 15


def test_even_repeats():
    assert median([1, 1, 2, 2]) == 1.5
