from square_sums import sum_of_squares


def test_empty():
    assert sum_of_squares([]) == 0


def test_zeros():
    assert sum_of_squares([0, 0]) == 0


def test_twos():
    assert sum_of_squares([2, 2]) == 8
