from textkit import truncate


def test_result_fits_width():
    assert truncate("abcdefghij", 6) == "abc..."
    assert len(truncate("x" * 100, 10)) == 10


def test_custom_ellipsis():
    assert truncate("abcdefghij", 5, ellipsis="~") == "abcd~"


def test_width_smaller_than_ellipsis():
    assert truncate("abcdef", 2) == ".."
    assert truncate("abcdef", 0) == ""
