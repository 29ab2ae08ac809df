from twos import is_power_of_two


def test_zero():
    assert is_power_of_two(0) is False


def test_negative():
    assert is_power_of_two(-4) is False


def test_six():
    assert is_power_of_two(6) is False


def test_three():
    assert is_power_of_two(3) is False


def test_twelve():
    assert is_power_of_two(12) is False
