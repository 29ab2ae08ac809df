from positives import count_positive


def test_mixed():
    assert count_positive([1, -2, 3]) == 2


def test_empty():
    assert count_positive([]) == 0


def test_negatives():
    assert count_positive([-1, -5]) == 0


def test_all_positive():
    assert count_positive([4, 5, 6]) == 3


def test_fractions():
    assert count_positive([0.5, -0.5]) == 1
