from square_check import is_perfect_square


def test_zero():
    assert is_perfect_square(0) is True


def test_one():
    assert is_perfect_square(1) is True


def test_squares():
    assert is_perfect_square(16) is True
    assert is_perfect_square(25) is True


def test_negative():
    assert is_perfect_square(-4) is False


def test_large():
    assert is_perfect_square(144) is True
