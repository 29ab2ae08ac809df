from ranges import clamp


def test_inside():
    assert clamp(5, 0, 10) == 5


def test_below_low():
    assert clamp(-3, 0, 10) == 0


def test_edges():
    assert clamp(0, 0, 10) == 0
    assert clamp(10, 0, 10) == 10


def test_far_below():
    assert clamp(-50, -5, 5) == -5


def test_inside_negative():
    assert clamp(-2, -5, 5) == -2
