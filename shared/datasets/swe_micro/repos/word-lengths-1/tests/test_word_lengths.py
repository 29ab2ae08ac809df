from word_sizes import word_lengths


def test_two_words():
    assert word_lengths("hello world") == [5, 5]


def test_in_order():
    assert word_lengths("a bb ccc") == [1, 2, 3]
    assert word_lengths("ccc a") == [3, 1]


def test_single():
    assert word_lengths("python") == [6]
