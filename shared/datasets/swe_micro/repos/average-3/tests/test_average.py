from means import average


def test_empty():
    assert average([]) == 0.0
