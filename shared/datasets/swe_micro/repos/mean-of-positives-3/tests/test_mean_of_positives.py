from positive_stats import mean_of_positives


def test_all_positive():
    assert mean_of_positives([1, 2, 3]) == 2.0


def test_zero_skipped():
    assert mean_of_positives([0, 4]) == 4.0


def test_mixed():
    assert mean_of_positives([-2, 3, 5]) == 4.0


def test_single():
    assert mean_of_positives([7]) == 7.0


def test_floats():
    assert mean_of_positives([1.5, -1, 2.5]) == 2.0
