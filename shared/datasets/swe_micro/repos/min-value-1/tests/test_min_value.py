from minimums import min_value


def test_empty():
    assert min_value([]) is None


def test_empty_tuple():
    assert min_value(()) is None


def test_single():
    assert min_value([7]) == 7
