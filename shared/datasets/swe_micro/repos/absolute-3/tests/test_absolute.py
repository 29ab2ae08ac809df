from magnitude import absolute


def test_negative():
    assert absolute(-4) == 4


def test_minus_one():
    assert absolute(-1) == 1


def test_zero():
    assert absolute(0) == 0


def test_fraction():
    assert absolute(-2.5) == 2.5


def test_small_negative():
    assert absolute(-0.25) == 0.25
