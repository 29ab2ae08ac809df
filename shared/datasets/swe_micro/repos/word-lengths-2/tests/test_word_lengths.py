from word_sizes import word_lengths


def test_two_words():
    assert word_lengths("hello world") == [5, 5]


def test_empty():
    assert word_lengths("") == []


def test_only_spaces():
    assert word_lengths("   ") == []


def test_single():
    assert word_lengths("python") == [6]


def test_extra_spaces():
    assert word_lengths("  to  be ") == [2, 2]


def test_tabs_and_newlines():
    assert word_lengths("x\tyz\nw") == [1, 2, 1]
