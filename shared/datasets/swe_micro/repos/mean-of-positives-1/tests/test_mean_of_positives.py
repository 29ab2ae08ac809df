from positive_stats import mean_of_positives


def test_all_positive():
    assert mean_of_positives([1, 2, 3]) == 2.0


def test_empty():
    assert mean_of_positives([]) == 0.0


def test_no_positives():
    assert mean_of_positives([-1, -5]) == 0.0
    assert mean_of_positives([0]) == 0.0


def test_mixed():
    assert mean_of_positives([-2, 3, 5]) == 4.0


def test_single():
    assert mean_of_positives([7]) == 7.0


def test_floats():
    assert mean_of_positives([1.5, -1, 2.5]) == 2.0
