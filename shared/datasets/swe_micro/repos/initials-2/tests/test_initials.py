from names import initials


def test_two_words():
    assert initials("ada lovelace") == "A.L."


def test_three_words():
    assert initials("Grace Brewster Hopper") == "G.B.H."


def test_one_word():
    assert initials("plato") == "P."


def test_letters():
    assert initials("x y") == "X.Y."
