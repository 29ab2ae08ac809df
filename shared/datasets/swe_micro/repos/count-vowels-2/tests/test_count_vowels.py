from letters import count_vowels


def test_lowercase():
    assert count_vowels("banana") == 3


def test_uppercase():
    assert count_vowels("APPLE") == 2


def test_no_vowels():
    assert count_vowels("rhythm") == 0


def test_sentence():
    assert count_vowels("Hello World") == 3


def test_empty():
    assert count_vowels("") == 0
