from temperature import to_fahrenheit


def test_freezing():
    assert to_fahrenheit(0) == 32
