import pytest
from durations import format_duration, parse_duration


def test_single_unit():
    assert parse_duration("90s") == 90
    assert parse_duration("2h") == 7200
    assert parse_duration(" 3D ") == 3 * 86400


def test_garbage_rejected():
    for text in ("", "abc", "5x", "h5"):
        with pytest.raises(ValueError):
            parse_duration(text)


def test_format_simple():
    assert format_duration(0) == "0s"
    assert format_duration(45) == "45s"
    assert format_duration(7200) == "2h"
