from positives import count_positive


def test_empty():
    assert count_positive([]) == 0


def test_zeros():
    assert count_positive([0, 0]) == 0


def test_zero_and_one():
    assert count_positive([0, 1]) == 1


def test_negatives():
    assert count_positive([-1, -5]) == 0
