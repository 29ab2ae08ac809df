from frequency import mode


def test_one_winner():
    assert mode([1, 2, 2, 3]) == 2


def test_tie_pair():
    assert mode([1, 2]) == 1


def test_empty():
    assert mode([]) is None


def test_empty_tuple():
    assert mode(()) is None


def test_threes():
    assert mode([3, 1, 1, 3, 3]) == 3
