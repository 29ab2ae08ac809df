from magnitude import absolute


def test_positive():
    assert absolute(5) == 5


def test_zero():
    assert absolute(0) == 0


def test_large_positive():
    assert absolute(12) == 12
