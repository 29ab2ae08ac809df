from calendar_rules import is_leap_year


def test_ordinary_leap():
    assert is_leap_year(2024) is True


def test_common_year():
    assert is_leap_year(2023) is False


def test_century():
    assert is_leap_year(1900) is False


def test_century_2100():
    assert is_leap_year(2100) is False


def test_year_1996():
    assert is_leap_year(1996) is True


def test_year_2019():
    assert is_leap_year(2019) is False
