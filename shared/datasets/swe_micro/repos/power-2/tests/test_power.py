from powers import power


def test_exponent_zero():
    assert power(5, 0) == 1


def test_zero_base():
    assert power(0, 3) == 0
