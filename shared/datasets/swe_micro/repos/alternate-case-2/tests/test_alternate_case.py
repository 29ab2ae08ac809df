from zigzag_case import alternate_case


def test_empty():
    assert alternate_case("") == ""


def test_lower():
    assert alternate_case("abcd") == "AbCd"


def test_upper():
    assert alternate_case("ABCD") == "AbCd"


def test_single():
    assert alternate_case("x") == "X"


def test_odd_length():
    assert alternate_case("hello") == "HeLlO"
