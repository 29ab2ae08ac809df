from signs import sign


def test_positive():
    assert sign(7) == 1


def test_negative():
    assert sign(-3) == -1


def test_small():
    assert sign(0.5) == 1
