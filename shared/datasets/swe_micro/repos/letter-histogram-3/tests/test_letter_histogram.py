from histogram import letter_histogram


def test_empty():
    assert letter_histogram("") == {}


def test_ignores_others():
    assert letter_histogram("a b!") == {"a": 1, "b": 1}
    assert letter_histogram("123") == {}


def test_single():
    assert letter_histogram("x") == {"x": 1}
