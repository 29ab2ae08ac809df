from combinatorics import factorial


def test_zero():
    assert factorial(0) == 1


def test_one():
    assert factorial(1) == 1


def test_three():
    assert factorial(3) == 6
