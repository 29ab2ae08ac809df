from ratios import percentage


def test_half():
    assert percentage(1, 2) == 50.0


def test_all():
    assert percentage(4, 4) == 100.0


def test_none():
    assert percentage(0, 5) == 0.0


def test_quarter():
    assert percentage(1, 4) == 25.0
