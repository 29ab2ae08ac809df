from twos import is_power_of_two


def test_one():
    assert is_power_of_two(1) is True


def test_two():
    assert is_power_of_two(2) is True


def test_eight():
    assert is_power_of_two(8) is True
    assert is_power_of_two(1024) is True
