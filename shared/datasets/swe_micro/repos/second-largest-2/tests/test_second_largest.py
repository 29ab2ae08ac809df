from runnersup import second_largest


def test_unsorted():
    assert second_largest([3, 9, 2]) == 3


def test_one_distinct():
    assert second_largest([7, 7]) is None


def test_single():
    assert second_largest([4]) is None


def test_empty():
    assert second_largest([]) is None


def test_negatives():
    assert second_largest([-1, -3, -2]) == -2
