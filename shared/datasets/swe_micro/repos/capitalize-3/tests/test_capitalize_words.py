from titles import capitalize_words


def test_one_word():
    assert capitalize_words("python") == "Python"
