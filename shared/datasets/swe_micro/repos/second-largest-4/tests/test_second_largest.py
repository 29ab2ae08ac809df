from runnersup import second_largest


def test_one_distinct():
    assert second_largest([7, 7]) is None


def test_single():
    assert second_largest([4]) is None


def test_empty():
    assert second_largest([]) is None
