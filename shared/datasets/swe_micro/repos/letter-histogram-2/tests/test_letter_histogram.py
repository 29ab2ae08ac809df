from histogram import letter_histogram


def test_empty():
    assert letter_histogram("") == {}


def test_repeats():
    assert letter_histogram("aab") == {"a": 2, "b": 1}


def test_ignores_case():
    assert letter_histogram("Aa") == {"a": 2}


def test_word():
    assert letter_histogram("Hello") == {"h": 1, "e": 1, "l": 2, "o": 1}


def test_single():
    assert letter_histogram("x") == {"x": 1}


def test_many():
    assert letter_histogram("banana") == {"b": 1, "a": 3, "n": 2}
