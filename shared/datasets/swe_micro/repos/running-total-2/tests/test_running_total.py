from totals import running_total


def test_empty():
    assert running_total([]) == []
