from means import average


def test_empty():
    assert average([]) == 0.0


def test_single():
    assert average([7]) == 7
