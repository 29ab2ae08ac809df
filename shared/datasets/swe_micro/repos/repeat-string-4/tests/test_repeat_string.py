from repeats import repeat_string


def test_once():
    assert repeat_string("x", 1) == "x"


def test_zero():
    assert repeat_string("x", 0) == ""


def test_negative():
    assert repeat_string("a", -2) == ""
