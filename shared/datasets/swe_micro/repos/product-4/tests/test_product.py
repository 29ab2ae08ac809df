from products import product


def test_three():
    assert product([2, 3, 4]) == 24


def test_empty():
    assert product([]) == 1


def test_single():
    assert product([5]) == 5


def test_zero():
    assert product([1, 0, 7]) == 0


def test_fraction():
    assert product([1.5, 2]) == 3.0
