from textkit import slugify


def test_words_are_joined():
    assert slugify("hello world") == "hello-world"


def test_accents_are_folded():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_custom_separator():
    assert slugify("a b c", separator="_") == "a_b_c"
