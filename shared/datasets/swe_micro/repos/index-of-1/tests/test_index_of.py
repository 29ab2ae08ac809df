from search import index_of


def test_found():
    assert index_of(["a", "b", "c"], "b") == 1


def test_first():
    assert index_of([5, 6], 5) == 0


def test_repeated():
    assert index_of([4, 7, 7], 7) == 1


def test_last():
    assert index_of([1, 2, 3], 3) == 2


def test_first_string():
    assert index_of(["x", "y"], "x") == 0
