from ranges import clamp


def test_above_high():
    assert clamp(15, 0, 10) == 10


def test_below_low():
    assert clamp(-3, 0, 10) == 0
