from letters import count_vowels


def test_lowercase():
    assert count_vowels("banana") == 3
