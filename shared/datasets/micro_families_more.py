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
    _f(
        "count_upper",
        "capitals",
        "count_upper",
        '''
def count_upper(text):
    """Number of uppercase letters in text."""
    count = 0
    for ch in text:
        if ch.isupper():
            count += 1
    return count
''',
        [
            Case("two", 'assert count_upper("Hello World") == 2'),
            Case("empty", 'assert count_upper("") == 0'),
            Case("all_lower", 'assert count_upper("abc") == 0'),
            Case("all_upper", 'assert count_upper("ABC") == 3'),
            Case("digits_and_marks", 'assert count_upper("A1 b!") == 1\n    assert count_upper("123") == 0'),
            Case("single", 'assert count_upper("Q") == 1'),
            Case("camel", 'assert count_upper("getHTTPResponse") == 5'),
        ],
        [
            Bug(
                "ch.isupper()",
                "ch.isalpha()",
                'count_upper counts lowercase letters\n\n`count_upper("Hello")` returns 5 but should return 1: only '
                "capital letters count.",
            ),
            Bug(
                "ch.isupper()",
                "ch == ch.upper()",
                'count_upper counts digits and spaces\n\n`count_upper("Hi 5")` returns 3 but should return 1: '
                "characters that are not letters are never uppercase.",
            ),
            Bug(
                "count = 0",
                "count = 1",
                'count_upper counts one too many\n\n`count_upper("Hello World")` returns 3 but should return 2.',
            ),
            Bug(
                "            count += 1\n    return count",
                "            count += 1\n        return count",
                'count_upper looks only at the first character\n\n`count_upper("aBC")` returns 0 but should return '
                "2: every character of the text is checked.",
            ),
        ],
    ),
    _f(
        "remove_spaces",
        "despace",
        "remove_spaces",
        '''
def remove_spaces(text):
    """text without its space characters (tabs and newlines are kept)."""
    result = ""
    for ch in text:
        if ch != " ":
            result += ch
    return result
''',
        [
            Case("words", 'assert remove_spaces("a b c") == "abc"'),
            Case("empty", 'assert remove_spaces("") == ""'),
            Case("only_spaces", 'assert remove_spaces("   ") == ""'),
            Case("no_spaces", 'assert remove_spaces("abc") == "abc"'),
            Case("edges", 'assert remove_spaces("  hi  ") == "hi"'),
            Case(
                "keeps_tabs",
                'assert remove_spaces("x \\ty") == "x\\ty"\n    assert remove_spaces("1 \\n2") == "1\\n2"',
            ),
            Case("punctuation", 'assert remove_spaces("a, b!") == "a,b!"'),
        ],
        [
            Bug(
                "result += ch",
                "result = ch",
                'remove_spaces keeps only the last character\n\n`remove_spaces("a b c")` returns "c" but should return '
                '"abc".',
            ),
            Bug(
                'if ch != " ":',
                "if not ch.isspace():",
                'remove_spaces removes tabs\n\n`remove_spaces("a\\tb")` returns "ab" but should return "a\\tb": only '
                "space characters are removed, other whitespace stays.",
            ),
            Bug(
                'result = ""',
                'result = " "',
                'remove_spaces adds a leading space\n\n`remove_spaces("ab")` returns " ab" but should return "ab".',
            ),
            Bug(
                'if ch != " ":',
                'if ch == " ":',
                'remove_spaces keeps only the spaces\n\n`remove_spaces("a b")` returns " " but should return "ab".',
            ),
        ],
    ),
    _f(
        "snake_to_camel",
        "case_style",
        "snake_to_camel",
        '''
def snake_to_camel(name):
    """Convert a snake_case name to camelCase: "max_line_length" -> "maxLineLength"."""
    parts = name.split("_")
    result = parts[0]
    for part in parts[1:]:
        result += part.capitalize()
    return result
''',
        [
            Case("three_words", 'assert snake_to_camel("max_line_length") == "maxLineLength"'),
            Case("one_word", 'assert snake_to_camel("name") == "name"'),
            Case("empty", 'assert snake_to_camel("") == ""'),
            Case("short_parts", 'assert snake_to_camel("a_b") == "aB"'),
            Case(
                "two_words",
                'assert snake_to_camel("user_id") == "userId"\n    assert snake_to_camel("is_ok") == "isOk"',
            ),
            Case("digit_part", 'assert snake_to_camel("x_1") == "x1"'),
            Case("upper_part", 'assert snake_to_camel("http_STATUS") == "httpStatus"'),
        ],
        [
            Bug(
                "part.capitalize()",
                "part.upper()",
                'snake_to_camel capitalizes whole words\n\n`snake_to_camel("user_id")` returns "userID" but should '
                'return "userId": only the first letter of each later word becomes uppercase.',
            ),
            Bug(
                "result = parts[0]",
                "result = parts[0].capitalize()",
                'snake_to_camel capitalizes the first word\n\n`snake_to_camel("max_line_length")` returns '
                '"MaxLineLength" but should return "maxLineLength": the first word stays as it is.',
            ),
            Bug(
                "result = parts[0]",
                'result = ""',
                'snake_to_camel drops the first word\n\n`snake_to_camel("user_name")` returns "Name" but should return '
                '"userName".',
            ),
            Bug(
                "parts[1:]",
                "parts[2:]",
                'snake_to_camel loses the second word\n\n`snake_to_camel("max_line_length")` returns "maxLength" but '
                'should return "maxLineLength".',
            ),
        ],
    ),
    _f(
        "camel_to_snake",
        "snake_style",
        "camel_to_snake",
        '''
def camel_to_snake(name):
    """Convert a camelCase name to snake_case: "maxLineLength" -> "max_line_length"."""
    result = ""
    for ch in name:
        if ch.isupper():
            result += "_" + ch.lower()
        else:
            result += ch
    return result
''',
        [
            Case("three_words", 'assert camel_to_snake("maxLineLength") == "max_line_length"'),
            Case("one_word", 'assert camel_to_snake("name") == "name"'),
            Case("empty", 'assert camel_to_snake("") == ""'),
            Case(
                "two_words",
                'assert camel_to_snake("userId") == "user_id"\n    assert camel_to_snake("isOk") == "is_ok"',
            ),
            Case("short", 'assert camel_to_snake("aB") == "a_b"'),
            Case("digits", 'assert camel_to_snake("x1Y") == "x1_y"'),
            Case("single_letter", 'assert camel_to_snake("x") == "x"'),
        ],
        [
            Bug(
                '"_" + ch.lower()',
                '"_" + ch',
                'camel_to_snake keeps capital letters\n\n`camel_to_snake("userId")` returns "user_Id" but should return '
                '"user_id": snake_case is all lowercase.',
            ),
            Bug(
                '"_" + ch.lower()',
                "ch.lower()",
                'camel_to_snake does not separate words\n\n`camel_to_snake("maxLineLength")` returns "maxlinelength" '
                'but should return "max_line_length".',
            ),
            Bug(
                '"_" + ch.lower()',
                'ch.lower() + "_"',
                'camel_to_snake puts underscores in the wrong place\n\n`camel_to_snake("userId")` returns "useri_d" '
                'but should return "user_id": the underscore goes before each new word.',
            ),
            Bug(
                "for ch in name:",
                "for ch in name[1:]:",
                'camel_to_snake drops the first letter\n\n`camel_to_snake("userId")` returns "ser_id" but should '
                'return "user_id".',
            ),
        ],
    ),
    _f(
        "binary_to_int",
        "binary_parse",
        "binary_to_int",
        '''
def binary_to_int(bits):
    """Value of a string of binary digits: "101" -> 5 ("" -> 0)."""
    value = 0
    for bit in bits:
        value = value * 2 + int(bit)
    return value
''',
        [
            Case("zero", 'assert binary_to_int("0") == 0'),
            Case("empty", 'assert binary_to_int("") == 0'),
            Case("one", 'assert binary_to_int("1") == 1'),
            Case("five", 'assert binary_to_int("101") == 5'),
            Case("six", 'assert binary_to_int("110") == 6\n    assert binary_to_int("1000") == 8'),
            Case("byte", 'assert binary_to_int("11111111") == 255'),
            Case("leading_zeros", 'assert binary_to_int("0011") == 3'),
        ],
        [
            Bug(
                "value * 2",
                "value * 10",
                'binary_to_int reads the digits as decimal\n\n`binary_to_int("101")` returns 101 but should return 5.',
            ),
            Bug(
                "for bit in bits:",
                "for bit in reversed(bits):",
                'binary_to_int reads the bits backwards\n\n`binary_to_int("110")` returns 3 but should return 6: the '
                "first digit is the most significant.",
            ),
            Bug(
                "value = 0",
                "value = 1",
                'binary_to_int is too large\n\n`binary_to_int("101")` returns 13 but should return 5.',
            ),
        ],
    ),
    _f(
        "int_to_binary",
        "binary_format",
        "int_to_binary",
        '''
def int_to_binary(n):
    """The binary digits of n as a string: 5 -> "101", -5 -> "-101", 0 -> "0"."""
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    n = abs(n)
    digits = ""
    while n > 0:
        digits = str(n % 2) + digits
        n //= 2
    return sign + digits
''',
        [
            Case("zero", 'assert int_to_binary(0) == "0"'),
            Case("one", 'assert int_to_binary(1) == "1"'),
            Case("two", 'assert int_to_binary(2) == "10"'),
            Case("five", 'assert int_to_binary(5) == "101"'),
            Case("six", 'assert int_to_binary(6) == "110"\n    assert int_to_binary(8) == "1000"'),
            Case("byte", 'assert int_to_binary(255) == "11111111"'),
            Case("thirteen", 'assert int_to_binary(13) == "1101"'),
            Case("negative", 'assert int_to_binary(-5) == "-101"\n    assert int_to_binary(-2) == "-10"'),
            Case("minus_one", 'assert int_to_binary(-1) == "-1"'),
        ],
        [
            Bug(
                "str(n % 2) + digits",
                "digits + str(n % 2)",
                'int_to_binary writes the bits backwards\n\n`int_to_binary(6)` returns "011" but should return "110": '
                "the most significant bit comes first.",
            ),
            Bug(
                "while n > 0:",
                "while n > 1:",
                'int_to_binary drops the leading bit\n\n`int_to_binary(5)` returns "01" but should return "101".',
            ),
            Bug(
                "    n = abs(n)\n",
                "",
                'int_to_binary loses the digits of negative numbers\n\n`int_to_binary(-6)` returns "-" but should '
                'return "-110": a negative number is written as a minus sign and the digits of its magnitude.',
            ),
            Bug(
                "return sign + digits",
                "return digits",
                'int_to_binary drops the minus sign\n\n`int_to_binary(-6)` returns "110" but should return "-110".',
            ),
        ],
    ),
)

MORE_RELATED: dict[str, str] = {}
"""Family name -> its group, for ``micro_families.RELATED`` (families of this file sharing an idiom)."""
