from snake_style import camel_to_snake


def test_one_word():
    assert camel_to_snake("name") == "name"


def test_empty():
    assert camel_to_snake("") == ""


def test_single_letter():
    assert camel_to_snake("x") == "x"
