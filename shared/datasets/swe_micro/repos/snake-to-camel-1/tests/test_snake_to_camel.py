from case_style import snake_to_camel


def test_one_word():
    assert snake_to_camel("name") == "name"


def test_empty():
    assert snake_to_camel("") == ""


def test_short_parts():
    assert snake_to_camel("a_b") == "aB"


def test_digit_part():
    assert snake_to_camel("x_1") == "x1"
