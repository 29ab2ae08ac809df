from multiples import lcm


def test_small():
    assert lcm(4, 6) == 12


def test_coprime():
    assert lcm(3, 5) == 15


def test_equal():
    assert lcm(7, 7) == 7


def test_one():
    assert lcm(1, 9) == 9


def test_shared_factor():
    assert lcm(8, 12) == 24


def test_multiple():
    assert lcm(6, 3) == 6
