from middles import median


def test_single():
    assert median([5]) == 5
