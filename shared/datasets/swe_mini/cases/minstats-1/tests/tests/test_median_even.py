from minstats import median


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5
    assert median([10, 20, 30, 40, 50, 60]) == 35


def test_median_two_values():
    assert median([7, 8]) == 7.5
