from positives import count_positive


def test_empty():
    assert count_positive([]) == 0


def test_zeros():
    assert count_positive([0, 0]) == 0


def test_negatives():
    assert count_positive([-1, -5]) == 0


def test_all_positive():
    assert count_positive([4, 5, 6]) == 3
