from totals import running_total


def test_empty():
    assert running_total([]) == []


def test_single():
    assert running_total([4]) == [4]
