from primes import is_prime


def test_two():
    assert is_prime(2) is True


def test_seven():
    assert is_prime(7) is True


def test_nine():
    assert is_prime(9) is False


def test_one():
    assert is_prime(1) is False


def test_negative():
    assert is_prime(-7) is False


def test_zero():
    assert is_prime(0) is False


def test_thirteen():
    assert is_prime(13) is True
