from powers import power


def test_exponent_zero():
    assert power(5, 0) == 1
