from backsearch import last_index_of


def test_repeated():
    assert last_index_of([4, 7, 7], 7) == 2


def test_missing():
    assert last_index_of([1, 2], 9) == -1


def test_empty():
    assert last_index_of([], 3) == -1


def test_strings():
    assert last_index_of(["a", "b", "a"], "a") == 2


def test_alternating():
    assert last_index_of([3, 1, 3, 1], 1) == 3
