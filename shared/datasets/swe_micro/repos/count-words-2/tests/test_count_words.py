from wordcount import count_words


def test_two():
    assert count_words("hello world") == 2
