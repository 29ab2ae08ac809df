from case_style import snake_to_camel


def test_empty():
    assert snake_to_camel("") == ""
