from despace import remove_spaces


def test_empty():
    assert remove_spaces("") == ""
