from capitals import count_upper


def test_all_lower():
    assert count_upper("abc") == 0


def test_digits_and_marks():
    assert count_upper("A1 b!") == 1
    assert count_upper("123") == 0


def test_single():
    assert count_upper("Q") == 1
