from names import initials


def test_one_word():
    assert initials("plato") == "P."


def test_empty():
    assert initials("") == ""


def test_leading_space():
    assert initials(" ada") == "A."
