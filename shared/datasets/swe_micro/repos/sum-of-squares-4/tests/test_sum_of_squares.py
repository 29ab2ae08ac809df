from square_sums import sum_of_squares


def test_empty():
    assert sum_of_squares([]) == 0


def test_single():
    assert sum_of_squares([3]) == 9


def test_three():
    assert sum_of_squares([1, 2, 3]) == 14


def test_zeros():
    assert sum_of_squares([0, 0]) == 0


def test_fraction():
    assert sum_of_squares([0.5]) == 0.25


def test_twos():
    assert sum_of_squares([2, 2]) == 8
