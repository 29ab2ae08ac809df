from ranges import clamp


def test_inside():
    assert clamp(5, 0, 10) == 5


def test_above_high():
    assert clamp(15, 0, 10) == 10


def test_edges():
    assert clamp(0, 0, 10) == 0
    assert clamp(10, 0, 10) == 10


def test_far_above():
    assert clamp(100, -5, 5) == 5


def test_inside_negative():
    assert clamp(-2, -5, 5) == -2
