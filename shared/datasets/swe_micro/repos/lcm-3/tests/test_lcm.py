from multiples import lcm


def test_coprime():
    assert lcm(3, 5) == 15


def test_one():
    assert lcm(1, 9) == 9
