from minimums import min_value


def test_negatives():
    assert min_value([-5, -2, -9]) == -9


def test_empty():
    assert min_value([]) is None


def test_empty_tuple():
    assert min_value(()) is None


def test_last_smallest():
    assert min_value([4, 6, 0]) == 0
