from sequences import fibonacci


def test_one():
    assert fibonacci(1) == 1
