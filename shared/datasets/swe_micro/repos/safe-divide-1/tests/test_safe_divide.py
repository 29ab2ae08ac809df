from division import safe_divide


def test_whole():
    assert safe_divide(6, 3) == 2


def test_zero_divisor():
    assert safe_divide(5, 0) is None


def test_negative():
    assert safe_divide(-6, 2) == -3


def test_zero_numerator():
    assert safe_divide(0, 5) == 0


def test_negative_by_zero():
    assert safe_divide(-3, 0) is None
