from signs import sign


def test_positive():
    assert sign(7) == 1


def test_zero():
    assert sign(0) == 0


def test_small():
    assert sign(0.5) == 1


def test_one():
    assert sign(1) == 1


def test_float_zero():
    assert sign(0.0) == 0
