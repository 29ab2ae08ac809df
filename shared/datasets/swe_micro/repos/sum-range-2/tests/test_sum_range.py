from intervals import sum_range


def test_backwards():
    assert sum_range(5, 2) == 0


def test_zero():
    assert sum_range(0, 0) == 0
