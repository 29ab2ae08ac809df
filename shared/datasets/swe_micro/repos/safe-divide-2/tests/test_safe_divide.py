from division import safe_divide


def test_zero_divisor():
    assert safe_divide(5, 0) is None


def test_negative_by_zero():
    assert safe_divide(-3, 0) is None
