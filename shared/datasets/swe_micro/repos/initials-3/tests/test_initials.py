from names import initials


def test_empty():
    assert initials("") == ""
