from powers import power


def test_exponent_one():
    assert power(3, 1) == 3


def test_zero_base():
    assert power(0, 3) == 0
