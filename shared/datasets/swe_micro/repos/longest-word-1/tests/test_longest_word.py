from longest import longest_word


def test_empty():
    assert longest_word("") == ""
    assert longest_word("\t\n") == ""


def test_single():
    assert longest_word("hello") == "hello"


def test_last():
    assert longest_word("a bb ccc") == "ccc"


def test_not_alphabetical():
    assert longest_word("zebra apple banana") == "banana"


def test_spaces():
    assert longest_word("  spaced   out  ") == "spaced"
