from frequency import mode


def test_empty():
    assert mode([]) is None


def test_empty_tuple():
    assert mode(()) is None


def test_single():
    assert mode([7]) == 7


def test_threes():
    assert mode([3, 1, 1, 3, 3]) == 3
