from search import index_of


def test_found():
    assert index_of(["a", "b", "c"], "b") == 1


def test_missing():
    assert index_of([1, 2], 9) == -1


def test_repeated():
    assert index_of([4, 7, 7], 7) == 1


def test_last():
    assert index_of([1, 2, 3], 3) == 2


def test_empty():
    assert index_of([], 1) == -1
