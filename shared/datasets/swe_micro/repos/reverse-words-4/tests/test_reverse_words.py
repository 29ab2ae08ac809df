from sentences import reverse_words


def test_two_words():
    assert reverse_words("hello world") == "world hello"


def test_three_words():
    assert reverse_words("a b c") == "c b a"


def test_single():
    assert reverse_words("alone") == "alone"
