from positive_stats import mean_of_positives


def test_all_positive():
    assert mean_of_positives([1, 2, 3]) == 2.0


def test_empty():
    assert mean_of_positives([]) == 0.0


def test_no_positives():
    assert mean_of_positives([-1, -5]) == 0.0
    assert mean_of_positives([0]) == 0.0


def test_zero_skipped():
    assert mean_of_positives([0, 4]) == 4.0


def test_single():
    assert mean_of_positives([7]) == 7.0
