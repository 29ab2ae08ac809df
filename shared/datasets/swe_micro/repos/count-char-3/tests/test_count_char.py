from tallies import count_char


def test_capital_char():
    assert count_char("Hello", "L") == 2
