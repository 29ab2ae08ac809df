from backsearch import last_index_of


def test_missing():
    assert last_index_of([1, 2], 9) == -1


def test_first():
    assert last_index_of([5, 6], 5) == 0


def test_empty():
    assert last_index_of([], 3) == -1
