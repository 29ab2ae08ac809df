from twos import is_power_of_two


def test_one():
    assert is_power_of_two(1) is True


def test_zero():
    assert is_power_of_two(0) is False


def test_negative():
    assert is_power_of_two(-4) is False


def test_six():
    assert is_power_of_two(6) is False


def test_twelve():
    assert is_power_of_two(12) is False
