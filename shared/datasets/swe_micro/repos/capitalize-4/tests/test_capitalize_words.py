from titles import capitalize_words


def test_two_words():
    assert capitalize_words("hello world") == "Hello World"


def test_shouting():
    assert capitalize_words("GOOD MORNING") == "Good Morning"


def test_one_word():
    assert capitalize_words("python") == "Python"


def test_mixed_case():
    assert capitalize_words("hELLO tHERE") == "Hello There"
