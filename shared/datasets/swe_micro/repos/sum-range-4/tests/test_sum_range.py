from intervals import sum_range


def test_zero():
    assert sum_range(0, 0) == 0
