from divisors import gcd


def test_common():
    assert gcd(12, 18) == 6


def test_zero_second():
    assert gcd(9, 0) == 9


def test_zero_first():
    assert gcd(0, 4) == 4


def test_equal():
    assert gcd(10, 10) == 10


def test_larger_first():
    assert gcd(48, 36) == 12


def test_zero_first_six():
    assert gcd(0, 6) == 6
