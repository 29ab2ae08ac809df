from repeats import repeat_string


def test_three():
    assert repeat_string("ab", 3) == "ababab"


def test_once():
    assert repeat_string("x", 1) == "x"


def test_separator():
    assert repeat_string("hi", 2, "-") == "hi-hi"


def test_long_separator():
    assert repeat_string("ok", 3, ", ") == "ok, ok, ok"
