from despace import remove_spaces


def test_words():
    assert remove_spaces("a b c") == "abc"


def test_empty():
    assert remove_spaces("") == ""


def test_only_spaces():
    assert remove_spaces("   ") == ""


def test_no_spaces():
    assert remove_spaces("abc") == "abc"


def test_edges():
    assert remove_spaces("  hi  ") == "hi"


def test_punctuation():
    assert remove_spaces("a, b!") == "a,b!"
