from letters import count_vowels


def test_no_vowels():
    assert count_vowels("rhythm") == 0
