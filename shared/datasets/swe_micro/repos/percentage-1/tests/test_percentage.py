from ratios import percentage


def test_none():
    assert percentage(0, 5) == 0.0
