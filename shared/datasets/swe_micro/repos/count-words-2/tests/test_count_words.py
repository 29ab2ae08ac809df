from wordcount import count_words


def test_two():
    assert count_words("hello world") == 2


def test_single():
    assert count_words("word") == 1
