from sentences import reverse_words


def test_single():
    assert reverse_words("alone") == "alone"


def test_empty():
    assert reverse_words("") == ""
