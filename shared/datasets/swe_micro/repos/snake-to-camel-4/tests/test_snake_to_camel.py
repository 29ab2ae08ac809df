from case_style import snake_to_camel


def test_one_word():
    assert snake_to_camel("name") == "name"


def test_empty():
    assert snake_to_camel("") == ""
