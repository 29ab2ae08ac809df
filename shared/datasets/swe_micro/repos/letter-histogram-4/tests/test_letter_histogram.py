from histogram import letter_histogram


def test_empty():
    assert letter_histogram("") == {}
