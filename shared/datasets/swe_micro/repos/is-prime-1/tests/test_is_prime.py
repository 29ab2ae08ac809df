from primes import is_prime


def test_two():
    assert is_prime(2) is True


def test_seven():
    assert is_prime(7) is True


def test_nine():
    assert is_prime(9) is False


def test_four():
    assert is_prime(4) is False


def test_zero():
    assert is_prime(0) is False


def test_eight():
    assert is_prime(8) is False


def test_thirteen():
    assert is_prime(13) is True
