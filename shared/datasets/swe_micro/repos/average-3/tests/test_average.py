from means import average


def test_empty():
    assert average([]) == 0.0


def test_empty_tuple():
    assert average(()) == 0.0
