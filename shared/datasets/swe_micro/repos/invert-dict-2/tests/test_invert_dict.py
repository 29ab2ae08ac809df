from dict_flip import invert_dict


def test_empty():
    assert invert_dict({}) == {}
