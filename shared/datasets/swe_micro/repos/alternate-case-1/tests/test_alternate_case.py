from zigzag_case import alternate_case


def test_empty():
    assert alternate_case("") == ""
