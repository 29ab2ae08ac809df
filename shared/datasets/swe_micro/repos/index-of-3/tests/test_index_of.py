from search import index_of


def test_missing():
    assert index_of([1, 2], 9) == -1


def test_empty():
    assert index_of([], 1) == -1
