"""More function families of the ``swe_micro`` dataset, in the form of ``micro_families.py`` (data only).

``micro_families.py`` adds ``MORE_FAMILIES`` to its families; ``micro.py`` builds and checks their tasks. Every
family has six or more cases (seven or more asserts, edge cases included) and three or more bugs, each breaking at
least one assert on an input its issue does not quote. ``MORE_RELATED`` names the families among them (or with an
older family) that share an idiom, for ``RELATED``: a group stays on one side of the family split.
"""

from __future__ import annotations

from shared.datasets.micro_families import Bug, Case, Family, _f

MORE_FAMILIES: tuple[Family, ...] = (
    _f(
        "word_lengths",
        "word_sizes",
        "word_lengths",
        '''
def word_lengths(text):
    """Lengths of the whitespace-separated words of text, in order."""
    lengths = []
    for word in text.split():
        lengths.append(len(word))
    return lengths
''',
        [
            Case("two_words", 'assert word_lengths("hello world") == [5, 5]'),
            Case(
                "in_order",
                'assert word_lengths("a bb ccc") == [1, 2, 3]\n    assert word_lengths("ccc a") == [3, 1]',
            ),
            Case("empty", 'assert word_lengths("") == []'),
            Case("only_spaces", 'assert word_lengths("   ") == []'),
            Case("single", 'assert word_lengths("python") == [6]'),
            Case("extra_spaces", 'assert word_lengths("  to  be ") == [2, 2]'),
            Case("tabs_and_newlines", 'assert word_lengths("x\\tyz\\nw") == [1, 2, 1]'),
        ],
        [
            Bug(
                "text.split()",
                'text.split(" ")',
                'word_lengths counts empty words\n\n`word_lengths("a  b")` returns [1, 0, 1] but should return '
                "[1, 1]: any run of whitespace separates two words.",
            ),
            Bug(
                "lengths.append(len(word))",
                "lengths.insert(0, len(word))",
                'word_lengths reverses the words\n\n`word_lengths("hi there")` returns [5, 2] but should return '
                "[2, 5]: the lengths come in the order of the words.",
            ),
            Bug(
                "        lengths.append(len(word))\n    return lengths",
                "        lengths.append(len(word))\n        return lengths",
                'word_lengths stops after the first word\n\n`word_lengths("one two three")` returns [3] but should '
                "return [3, 3, 5]: every word has its length in the list.",
            ),
            Bug(
                "append(len(word))",
                "append(len(text))",
                'word_lengths measures the wrong thing\n\n`word_lengths("red fox")` returns [7, 7] but should return '
                "[3, 3]: each entry is the length of one word.",
            ),
        ],
    ),
    _f(
        "invert_dict",
        "dict_flip",
        "invert_dict",
        '''
def invert_dict(mapping):
    """Swap keys and values; when a value repeats, the first key with it wins."""
    inverted = {}
    for key, value in mapping.items():
        if value not in inverted:
            inverted[value] = key
    return inverted
''',
        [
            Case("empty", "assert invert_dict({}) == {}"),
            Case("single", 'assert invert_dict({"a": 1}) == {1: "a"}'),
            Case("two", 'assert invert_dict({"a": 1, "b": 2}) == {1: "a", 2: "b"}'),
            Case("repeated_value", 'assert invert_dict({"x": 0, "y": 5, "z": 0}) == {0: "x", 5: "y"}'),
            Case("numbers_to_names", 'assert invert_dict({1: "one", 2: "two"}) == {"one": 1, "two": 2}'),
            Case("key_order", 'assert list(invert_dict({"b": 2, "a": 1})) == [2, 1]'),
            Case("all_same", 'assert invert_dict({"p": 7, "q": 7, "r": 7}) == {7: "p"}'),
        ],
        [
            Bug(
                "        if value not in inverted:\n            inverted[value] = key",
                "        inverted[value] = key",
                'invert_dict keeps the last key of a repeated value\n\n`invert_dict({"a": 1, "b": 1})` returns '
                '{1: "b"} but should return {1: "a"}: when keys share a value, the first key wins.',
            ),
            Bug(
                "inverted[value] = key",
                "inverted[key] = value",
                'invert_dict does not swap\n\n`invert_dict({"a": 1})` returns {"a": 1} but should return {1: "a"}: '
                "the values become the keys.",
            ),
            Bug(
                "if value not in inverted:",
                "if value in inverted:",
                'invert_dict returns an empty dict\n\n`invert_dict({"a": 1, "b": 2})` returns {} but should return '
                '{1: "a", 2: "b"}.',
            ),
        ],
    ),
)

MORE_RELATED: dict[str, str] = {}
"""Family name -> its group, for ``micro_families.RELATED`` (families of this file sharing an idiom)."""
