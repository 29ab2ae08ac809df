from products import product


def test_empty():
    assert product([]) == 1
