from snake_style import camel_to_snake


def test_empty():
    assert camel_to_snake("") == ""
