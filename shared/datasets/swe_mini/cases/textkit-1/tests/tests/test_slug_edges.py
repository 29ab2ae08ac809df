from textkit import slugify


def test_trailing_punctuation():
    assert slugify("Hello, World!") == "hello-world"


def test_surrounding_spaces():
    assert slugify("  spaced out  ") == "spaced-out"
    assert slugify("  spaced out  ", separator="_") == "spaced_out"


def test_only_punctuation():
    assert slugify("!!!") == ""
