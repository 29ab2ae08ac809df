from thermometer import to_celsius


def test_freezing():
    assert to_celsius(32) == 0
