import pytest
from minstats import parse_number


def test_thousands_separator():
    assert parse_number("1,234.5") == 1234.5
    assert parse_number("1,234,567") == 1234567
    assert parse_number("-2,000") == -2000


def test_percent():
    assert parse_number("12.5%") == pytest.approx(0.125)
    assert parse_number(" 100% ") == pytest.approx(1.0)


@pytest.mark.parametrize("text", ["1,,2", "%", ",5", "12%%", "abc"])
def test_malformed_still_rejected(text):
    with pytest.raises(ValueError):
        parse_number(text)
