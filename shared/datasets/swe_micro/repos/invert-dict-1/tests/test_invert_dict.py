from dict_flip import invert_dict


def test_empty():
    assert invert_dict({}) == {}


def test_single():
    assert invert_dict({"a": 1}) == {1: "a"}


def test_two():
    assert invert_dict({"a": 1, "b": 2}) == {1: "a", 2: "b"}


def test_numbers_to_names():
    assert invert_dict({1: "one", 2: "two"}) == {"one": 1, "two": 2}


def test_key_order():
    assert list(invert_dict({"b": 2, "a": 1})) == [2, 1]
