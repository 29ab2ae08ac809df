from textkit import truncate


def test_short_text_is_unchanged():
    assert truncate("abc", 5) == "abc"


def test_exact_fit_is_unchanged():
    assert truncate("abcde", 5) == "abcde"
