from ordering import is_sorted


def test_ascending():
    assert is_sorted([1, 2, 3]) is True


def test_unsorted():
    assert is_sorted([3, 1, 2]) is False


def test_empty():
    assert is_sorted([]) is True


def test_last_pair():
    assert is_sorted([1, 2, 5, 4]) is False


def test_last_two():
    assert is_sorted([0, 9, 8]) is False


def test_single():
    assert is_sorted([4]) is True
