from squares import square_all


def test_empty():
    assert square_all([]) == []
