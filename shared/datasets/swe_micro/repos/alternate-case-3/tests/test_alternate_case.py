from zigzag_case import alternate_case


def test_empty():
    assert alternate_case("") == ""


def test_lower():
    assert alternate_case("abcd") == "AbCd"


def test_spaces_skipped():
    assert alternate_case("a b c") == "A b C"


def test_single():
    assert alternate_case("x") == "X"


def test_digits_skipped():
    assert alternate_case("hi 2 you") == "Hi 2 YoU"
    assert alternate_case("123") == "123"


def test_odd_length():
    assert alternate_case("hello") == "HeLlO"
