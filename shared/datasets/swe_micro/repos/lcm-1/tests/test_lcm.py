from multiples import lcm


def test_equal():
    assert lcm(7, 7) == 7


def test_one():
    assert lcm(1, 9) == 9


def test_multiple():
    assert lcm(6, 3) == 6
