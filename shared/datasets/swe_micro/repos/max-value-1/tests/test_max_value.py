from extremes import max_value


def test_empty():
    assert max_value([]) is None


def test_single():
    assert max_value([7]) == 7


def test_empty_tuple():
    assert max_value(()) is None
