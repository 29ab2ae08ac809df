from capitals import count_upper


def test_empty():
    assert count_upper("") == 0


def test_all_lower():
    assert count_upper("abc") == 0


def test_all_upper():
    assert count_upper("ABC") == 3


def test_single():
    assert count_upper("Q") == 1


def test_camel():
    assert count_upper("getHTTPResponse") == 5
