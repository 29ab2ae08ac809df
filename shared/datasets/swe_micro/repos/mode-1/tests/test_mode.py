from frequency import mode


def test_one_winner():
    assert mode([1, 2, 2, 3]) == 2


def test_tie_strings():
    assert mode(["a", "b", "b", "a"]) == "a"


def test_empty():
    assert mode([]) is None


def test_empty_tuple():
    assert mode(()) is None


def test_single():
    assert mode([7]) == 7


def test_threes():
    assert mode([3, 1, 1, 3, 3]) == 3


def test_smaller_wins():
    assert mode([9, 8, 8]) == 8
