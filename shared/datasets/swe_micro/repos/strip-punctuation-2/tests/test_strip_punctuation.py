from depunct import strip_punctuation


def test_plain():
    assert strip_punctuation("hello") == "hello"


def test_inner_kept():
    assert strip_punctuation("don't") == "don't"


def test_empty():
    assert strip_punctuation("") == ""


def test_only_marks():
    assert strip_punctuation("!?!") == ""
