from word_sizes import word_lengths


def test_empty():
    assert word_lengths("") == []


def test_only_spaces():
    assert word_lengths("   ") == []


def test_single():
    assert word_lengths("python") == [6]
