from depunct import strip_punctuation


def test_trailing():
    assert strip_punctuation("hello!") == "hello"
    assert strip_punctuation("end.") == "end"


def test_both_ends():
    assert strip_punctuation("...wait...") == "wait"


def test_empty():
    assert strip_punctuation("") == ""


def test_only_marks():
    assert strip_punctuation("!?!") == ""


def test_quotes():
    assert strip_punctuation("'quoted'") == "quoted"


def test_double_quotes():
    assert strip_punctuation('"yes,"') == "yes"
