from longest import longest_word


def test_single():
    assert longest_word("hello") == "hello"


def test_equal_length():
    assert longest_word("aa bb") == "aa"


def test_spaces():
    assert longest_word("  spaced   out  ") == "spaced"
