from dedupe import remove_duplicates


def test_empty():
    assert remove_duplicates([]) == []
