from sequences import fibonacci


def test_zero():
    assert fibonacci(0) == 0


def test_two():
    assert fibonacci(2) == 1
