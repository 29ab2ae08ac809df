from ratios import percentage


def test_all():
    assert percentage(4, 4) == 100.0
