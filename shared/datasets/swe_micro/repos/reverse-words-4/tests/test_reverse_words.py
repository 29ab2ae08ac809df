from sentences import reverse_words


def test_two_words():
    assert reverse_words("hello world") == "world hello"


def test_three_words():
    assert reverse_words("a b c") == "c b a"


def test_single():
    assert reverse_words("alone") == "alone"


def test_four_words():
    assert reverse_words("one two three four") == "four three two one"


def test_empty():
    assert reverse_words("") == ""
