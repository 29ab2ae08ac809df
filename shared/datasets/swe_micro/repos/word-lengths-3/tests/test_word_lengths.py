from word_sizes import word_lengths


def test_single():
    assert word_lengths("python") == [6]
