from depunct import strip_punctuation


def test_empty():
    assert strip_punctuation("") == ""


def test_only_marks():
    assert strip_punctuation("!?!") == ""
