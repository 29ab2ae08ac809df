from titles import capitalize_words


def test_spaces():
    assert capitalize_words("a  b") == "A B"
