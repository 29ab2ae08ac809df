from ordering import is_sorted


def test_ascending():
    assert is_sorted([1, 2, 3]) is True


def test_unsorted():
    assert is_sorted([3, 1, 2]) is False


def test_equal_neighbours():
    assert is_sorted([2, 2, 5]) is True


def test_empty():
    assert is_sorted([]) is True


def test_equal_pair():
    assert is_sorted([3, 3]) is True


def test_single():
    assert is_sorted([4]) is True
