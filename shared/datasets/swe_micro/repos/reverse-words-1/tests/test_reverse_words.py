from sentences import reverse_words


def test_three_words():
    assert reverse_words("a b c") == "c b a"


def test_empty():
    assert reverse_words("") == ""
