from rle import run_length_encode


def test_empty():
    assert run_length_encode("") == []
