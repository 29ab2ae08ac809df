from minimums import min_value


def test_unsorted():
    assert min_value([3, 1, 2]) == 1


def test_negatives():
    assert min_value([-5, -2, -9]) == -9


def test_single():
    assert min_value([7]) == 7


def test_last_smallest():
    assert min_value([4, 6, 0]) == 0


def test_positives():
    assert min_value([5, 8, 9]) == 5


def test_duplicates():
    assert min_value([2, 2, 3]) == 2
