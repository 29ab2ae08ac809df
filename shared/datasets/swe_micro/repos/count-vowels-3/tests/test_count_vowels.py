from letters import count_vowels


def test_lowercase():
    assert count_vowels("banana") == 3


def test_empty():
    assert count_vowels("") == 0


def test_capital_u():
    assert count_vowels("Ubuntu") == 3
