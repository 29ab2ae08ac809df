from extremes import max_value


def test_unsorted():
    assert max_value([3, 9, 2]) == 9


def test_empty():
    assert max_value([]) is None
