from longest import longest_word


def test_tie_first():
    assert longest_word("the quick brown fox") == "quick"


def test_single():
    assert longest_word("hello") == "hello"


def test_last():
    assert longest_word("a bb ccc") == "ccc"


def test_equal_length():
    assert longest_word("aa bb") == "aa"


def test_not_alphabetical():
    assert longest_word("zebra apple banana") == "banana"


def test_spaces():
    assert longest_word("  spaced   out  ") == "spaced"
