import pytest
from durations import parse_duration


def test_two_units():
    assert parse_duration("1h30m") == 5400


def test_all_units():
    assert parse_duration("1d2h3m4s") == 93784


def test_repeated_or_unordered_units_rejected():
    assert parse_duration("2m5s") == 125
    for text in ("1h2h", "30m1h"):
        with pytest.raises(ValueError):
            parse_duration(text)
