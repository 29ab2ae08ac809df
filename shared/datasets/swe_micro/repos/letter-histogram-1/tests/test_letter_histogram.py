from histogram import letter_histogram


def test_empty():
    assert letter_histogram("") == {}


def test_repeats():
    assert letter_histogram("aab") == {"a": 2, "b": 1}


def test_ignores_others():
    assert letter_histogram("a b!") == {"a": 1, "b": 1}
    assert letter_histogram("123") == {}


def test_single():
    assert letter_histogram("x") == {"x": 1}


def test_many():
    assert letter_histogram("banana") == {"b": 1, "a": 3, "n": 2}
