from primes import is_prime


def test_nine():
    assert is_prime(9) is False


def test_four():
    assert is_prime(4) is False


def test_one():
    assert is_prime(1) is False
