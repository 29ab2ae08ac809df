from sequences import fibonacci


def test_zero():
    assert fibonacci(0) == 0


def test_one():
    assert fibonacci(1) == 1


def test_two():
    assert fibonacci(2) == 1


def test_three():
    assert fibonacci(3) == 2
