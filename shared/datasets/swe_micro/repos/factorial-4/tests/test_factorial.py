from combinatorics import factorial


def test_one():
    assert factorial(1) == 1
