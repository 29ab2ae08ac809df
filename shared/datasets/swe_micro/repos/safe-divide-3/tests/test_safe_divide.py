from division import safe_divide


def test_whole():
    assert safe_divide(6, 3) == 2


def test_fraction():
    assert safe_divide(1, 4) == 0.25


def test_negative():
    assert safe_divide(-6, 2) == -3


def test_half():
    assert safe_divide(7, 2) == 3.5
