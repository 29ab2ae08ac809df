from ranges import clamp


def test_above_high():
    assert clamp(15, 0, 10) == 10


def test_below_low():
    assert clamp(-3, 0, 10) == 0


def test_far_above():
    assert clamp(100, -5, 5) == 5


def test_far_below():
    assert clamp(-50, -5, 5) == -5
