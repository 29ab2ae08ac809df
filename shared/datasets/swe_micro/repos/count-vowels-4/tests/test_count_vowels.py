from letters import count_vowels


def test_no_vowels():
    assert count_vowels("rhythm") == 0


def test_empty():
    assert count_vowels("") == 0
