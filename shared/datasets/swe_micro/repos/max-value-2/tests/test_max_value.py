from extremes import max_value


def test_unsorted():
    assert max_value([3, 9, 2]) == 9


def test_empty():
    assert max_value([]) is None


def test_duplicates():
    assert max_value([4, 4, 1]) == 4


def test_last_largest():
    assert max_value([1, 2, 8]) == 8


def test_empty_tuple():
    assert max_value(()) is None
