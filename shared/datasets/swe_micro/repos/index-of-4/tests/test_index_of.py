from search import index_of


def test_empty():
    assert index_of([], 1) == -1
