from tallies import count_char


def test_banana():
    assert count_char("banana", "a") == 3


def test_mississippi():
    assert count_char("Mississippi", "s") == 4


def test_shouting():
    assert count_char("APPLE", "p") == 2


def test_capital_char():
    assert count_char("Hello", "L") == 2


def test_empty():
    assert count_char("", "x") == 0


def test_absent():
    assert count_char("hello", "z") == 0
