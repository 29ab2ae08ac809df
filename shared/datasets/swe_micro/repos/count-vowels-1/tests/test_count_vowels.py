from letters import count_vowels


def test_lowercase():
    assert count_vowels("banana") == 3


def test_all_vowels():
    assert count_vowels("education") == 5


def test_no_vowels():
    assert count_vowels("rhythm") == 0
