from square_check import is_perfect_square


def test_zero():
    assert is_perfect_square(0) is True


def test_two():
    assert is_perfect_square(2) is False


def test_just_below():
    assert is_perfect_square(15) is False


def test_negative():
    assert is_perfect_square(-4) is False


def test_between():
    assert is_perfect_square(8) is False


def test_large():
    assert is_perfect_square(144) is True
