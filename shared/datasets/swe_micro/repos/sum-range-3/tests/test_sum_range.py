from intervals import sum_range


def test_backwards():
    assert sum_range(5, 2) == 0
