from backsearch import last_index_of


def test_repeated():
    assert last_index_of([4, 7, 7], 7) == 2


def test_first():
    assert last_index_of([5, 6], 5) == 0


def test_strings():
    assert last_index_of(["a", "b", "a"], "a") == 2


def test_alternating():
    assert last_index_of([3, 1, 3, 1], 1) == 3


def test_single():
    assert last_index_of([8], 8) == 0
