import pytest
from minstats import column, parse_number


def test_plain_numbers():
    assert parse_number(" 42 ") == 42
    assert parse_number("-3.5") == -3.5


def test_empty_cell():
    with pytest.raises(ValueError):
        parse_number("  ")


def test_column():
    assert column(["a,1", "b,2", "", "c,3.5"], 1) == [1, 2, 3.5]
