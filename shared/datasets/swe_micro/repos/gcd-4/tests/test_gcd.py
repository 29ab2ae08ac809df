from divisors import gcd


def test_common():
    assert gcd(12, 18) == 6


def test_zero_second():
    assert gcd(9, 0) == 9


def test_equal():
    assert gcd(10, 10) == 10


def test_coprime_larger():
    assert gcd(9, 28) == 1
