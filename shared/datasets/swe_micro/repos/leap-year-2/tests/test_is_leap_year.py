from calendar_rules import is_leap_year


def test_ordinary_leap():
    assert is_leap_year(2024) is True


def test_common_year():
    assert is_leap_year(2023) is False


def test_four_hundred():
    assert is_leap_year(2000) is True
