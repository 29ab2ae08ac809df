from primes import is_prime


def test_nine():
    assert is_prime(9) is False


def test_four():
    assert is_prime(4) is False


def test_one():
    assert is_prime(1) is False


def test_negative():
    assert is_prime(-7) is False


def test_zero():
    assert is_prime(0) is False


def test_eight():
    assert is_prime(8) is False
