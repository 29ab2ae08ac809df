from names import initials


def test_three_words():
    assert initials("Grace Brewster Hopper") == "G.B.H."


def test_empty():
    assert initials("") == ""
