from signs import sign


def test_positive():
    assert sign(7) == 1


def test_negative():
    assert sign(-3) == -1


def test_zero():
    assert sign(0) == 0


def test_big_negative():
    assert sign(-100) == -1


def test_tiny_negative():
    assert sign(-0.5) == -1


def test_float_zero():
    assert sign(0.0) == 0
