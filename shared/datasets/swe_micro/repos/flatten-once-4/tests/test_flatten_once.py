from nesting import flatten_once


def test_empty():
    assert flatten_once([]) == []


def test_empty_inner():
    assert flatten_once([[], [4]]) == [4]
