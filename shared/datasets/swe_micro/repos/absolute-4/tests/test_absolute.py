from magnitude import absolute


def test_positive():
    assert absolute(5) == 5


def test_negative():
    assert absolute(-4) == 4


def test_zero():
    assert absolute(0) == 0


def test_fraction():
    assert absolute(-2.5) == 2.5


def test_large_positive():
    assert absolute(12) == 12
