from chunks import chunk_list


def test_empty():
    assert chunk_list([], 3) == []
