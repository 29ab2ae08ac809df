from wordcount import count_words


def test_empty():
    assert count_words("") == 0
