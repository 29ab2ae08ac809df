from runnersup import second_largest


def test_unsorted():
    assert second_largest([3, 9, 2]) == 3


def test_single():
    assert second_largest([4]) is None


def test_empty():
    assert second_largest([]) is None


def test_negatives():
    assert second_largest([-1, -3, -2]) == -2


def test_four():
    assert second_largest([1, 2, 3, 4]) == 3


def test_five():
    assert second_largest([8, 6, 4, 2, 0]) == 6
