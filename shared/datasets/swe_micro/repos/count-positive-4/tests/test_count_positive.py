from positives import count_positive


def test_empty():
    assert count_positive([]) == 0


def test_zeros():
    assert count_positive([0, 0]) == 0


def test_fractions():
    assert count_positive([0.5, -0.5]) == 1
