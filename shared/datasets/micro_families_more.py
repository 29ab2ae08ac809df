"""More function families of the ``swe_micro`` dataset, in the form of ``micro_families.py`` (data only).

``micro.py`` appends ``MORE_FAMILIES`` to ``FAMILIES`` and ``MORE_RELATED`` to ``RELATED``, and builds and checks
their tasks. Every family has six or more cases (seven or more asserts, edge cases included) and three or more bugs,
each breaking at least one assert on an input its issue does not quote (``tests/unit/test_micro_families_more.py``).
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
    _f(
        "is_perfect_square",
        "square_check",
        "is_perfect_square",
        '''
def is_perfect_square(n):
    """True if n is the square of an integer (0 and 1 are; negative numbers are not)."""
    if n < 0:
        return False
    root = 0
    while root * root < n:
        root += 1
    return root * root == n
''',
        [
            Case("zero", "assert is_perfect_square(0) is True"),
            Case("one", "assert is_perfect_square(1) is True"),
            Case("squares", "assert is_perfect_square(16) is True\n    assert is_perfect_square(25) is True"),
            Case("two", "assert is_perfect_square(2) is False"),
            Case("just_below", "assert is_perfect_square(15) is False"),
            Case("negative", "assert is_perfect_square(-4) is False"),
            Case("between", "assert is_perfect_square(8) is False"),
            Case("large", "assert is_perfect_square(144) is True"),
        ],
        [
            Bug(
                "while root * root < n:",
                "while root * root <= n:",
                "is_perfect_square rejects squares\n\n`is_perfect_square(16)` returns False but should return True.",
            ),
            Bug(
                "return root * root == n",
                "return root * root >= n",
                "is_perfect_square accepts non-squares\n\n`is_perfect_square(8)` returns True but should return "
                "False: only squares of integers are accepted.",
            ),
            Bug(
                "root += 1",
                "root += 2",
                "is_perfect_square misses odd squares\n\n`is_perfect_square(9)` returns False but should return True.",
            ),
        ],
    ),
    _f(
        "triangular_number",
        "triangles",
        "triangular_number",
        '''
def triangular_number(n):
    """1 + 2 + ... + n for n >= 0 (0 for n == 0)."""
    total = 0
    for i in range(1, n + 1):
        total += i
    return total
''',
        [
            Case("zero", "assert triangular_number(0) == 0"),
            Case("one", "assert triangular_number(1) == 1"),
            Case("two", "assert triangular_number(2) == 3"),
            Case("four", "assert triangular_number(4) == 10"),
            Case("ten", "assert triangular_number(10) == 55\n    assert triangular_number(7) == 28"),
            Case("hundred", "assert triangular_number(100) == 5050"),
        ],
        [
            Bug(
                "range(1, n + 1)",
                "range(1, n)",
                "triangular_number leaves out n\n\n`triangular_number(4)` returns 6 but should return 10 "
                "(1 + 2 + 3 + 4).",
            ),
            Bug(
                "total = 0",
                "total = 1",
                "triangular_number is one too large\n\n`triangular_number(4)` returns 11 but should return 10.",
            ),
            Bug(
                "total += i",
                "total += n",
                "triangular_number returns n squared\n\n`triangular_number(4)` returns 16 but should return 10 "
                "(1 + 2 + 3 + 4).",
            ),
        ],
    ),
    _f(
        "mean_of_positives",
        "positive_stats",
        "mean_of_positives",
        '''
def mean_of_positives(numbers):
    """Mean of the numbers greater than zero, or 0.0 when there are none."""
    positives = [n for n in numbers if n > 0]
    if not positives:
        return 0.0
    return sum(positives) / len(positives)
''',
        [
            Case("all_positive", "assert mean_of_positives([1, 2, 3]) == 2.0"),
            Case("empty", "assert mean_of_positives([]) == 0.0"),
            Case(
                "no_positives",
                "assert mean_of_positives([-1, -5]) == 0.0\n    assert mean_of_positives([0]) == 0.0",
            ),
            Case("zero_skipped", "assert mean_of_positives([0, 4]) == 4.0"),
            Case("mixed", "assert mean_of_positives([-2, 3, 5]) == 4.0"),
            Case("single", "assert mean_of_positives([7]) == 7.0"),
            Case("floats", "assert mean_of_positives([1.5, -1, 2.5]) == 2.0"),
        ],
        [
            Bug(
                "if n > 0]",
                "if n >= 0]",
                "mean_of_positives counts zeros\n\n`mean_of_positives([0, 6])` returns 3.0 but should return 6.0: "
                "zero is not positive.",
            ),
            Bug(
                "len(positives)",
                "len(numbers)",
                "mean_of_positives divides by too much\n\n`mean_of_positives([-4, 2, 4])` returns 2.0 but should "
                "return 3.0: the mean is over the positive numbers only.",
            ),
            Bug(
                "    if not positives:\n        return 0.0\n",
                "",
                "mean_of_positives crashes on an empty list\n\n`mean_of_positives([])` raises ZeroDivisionError but "
                "should return 0.0, as for any list without positive numbers.",
            ),
            Bug(
                "sum(positives)",
                "sum(numbers)",
                "mean_of_positives adds the negative numbers\n\n`mean_of_positives([-2, 3, 5])` returns 3.0 but "
                "should return 4.0: numbers below or equal to zero are left out.",
            ),
        ],
    ),
    _f(
        "run_length_encode",
        "rle",
        "run_length_encode",
        '''
def run_length_encode(text):
    """Runs of equal characters as (char, count) pairs: "aab" -> [("a", 2), ("b", 1)]."""
    runs = []
    for ch in text:
        if runs and runs[-1][0] == ch:
            runs[-1] = (ch, runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs
''',
        [
            Case("empty", 'assert run_length_encode("") == []'),
            Case("single", 'assert run_length_encode("a") == [("a", 1)]'),
            Case("pair_then_one", 'assert run_length_encode("aab") == [("a", 2), ("b", 1)]'),
            Case("one_then_pair", 'assert run_length_encode("abb") == [("a", 1), ("b", 2)]'),
            Case("one_run", 'assert run_length_encode("aaa") == [("a", 3)]'),
            Case(
                "alternating", 'assert run_length_encode("abab") == [("a", 1), ("b", 1), ("a", 1), ("b", 1)]'
            ),
            Case("longer", 'assert run_length_encode("aabbbc") == [("a", 2), ("b", 3), ("c", 1)]'),
        ],
        [
            Bug(
                "runs[-1][1] + 1",
                "runs[-1][1]",
                'run_length_encode never counts past one\n\n`run_length_encode("xxy")` returns [("x", 1), ("y", 1)] '
                'but should return [("x", 2), ("y", 1)].',
            ),
            Bug(
                "runs.append((ch, 1))",
                "runs.append((ch, 0))",
                'run_length_encode counts one too few\n\n`run_length_encode("aab")` returns [("a", 1), ("b", 0)] but '
                'should return [("a", 2), ("b", 1)].',
            ),
            Bug(
                "runs[-1][0] == ch",
                "runs[0][0] == ch",
                'run_length_encode splits later runs\n\n`run_length_encode("abb")` returns [("a", 1), ("b", 1), '
                '("b", 1)] but should return [("a", 1), ("b", 2)]: each run of equal characters is one pair.',
            ),
        ],
    ),
    _f(
        "longest_word",
        "longest",
        "longest_word",
        '''
def longest_word(text):
    """The longest word of text (the first one on ties), or "" when there is none."""
    best = ""
    for word in text.split():
        if len(word) > len(best):
            best = word
    return best
''',
        [
            Case("tie_first", 'assert longest_word("the quick brown fox") == "quick"'),
            Case("empty", 'assert longest_word("") == ""\n    assert longest_word("\\t\\n") == ""'),
            Case("single", 'assert longest_word("hello") == "hello"'),
            Case("last", 'assert longest_word("a bb ccc") == "ccc"'),
            Case("equal_length", 'assert longest_word("aa bb") == "aa"'),
            Case("not_alphabetical", 'assert longest_word("zebra apple banana") == "banana"'),
            Case("spaces", 'assert longest_word("  spaced   out  ") == "spaced"'),
        ],
        [
            Bug(
                "len(word) > len(best)",
                "len(word) >= len(best)",
                'longest_word picks the last of equally long words\n\n`longest_word("cat dog")` returns "dog" but '
                'should return "cat": on a tie the first word wins.',
            ),
            Bug(
                "len(word) > len(best)",
                "word > best",
                'longest_word picks the word that sorts last\n\n`longest_word("zoo elephant")` returns "zoo" but '
                'should return "elephant".',
            ),
            Bug(
                "            best = word\n    return best",
                "            best = word\n        return best",
                'longest_word returns the first word\n\n`longest_word("a longer sentence")` returns "a" but should '
                'return "sentence".',
            ),
            Bug(
                'best = ""',
                "best = text.split()[0]",
                'longest_word crashes without words\n\n`longest_word("")` raises IndexError but should return "".',
            ),
        ],
    ),
    _f(
        "rotate_string",
        "string_rotation",
        "rotate_string",
        '''
def rotate_string(text, k):
    """text rotated right by k places: rotate_string("abcde", 2) -> "deabc" (negative k rotates left)."""
    if not text:
        return text
    k %= len(text)
    return text[-k:] + text[:-k]
''',
        [
            Case("two", 'assert rotate_string("abcde", 2) == "deabc"'),
            Case("zero", 'assert rotate_string("abcde", 0) == "abcde"'),
            Case("full_turn", 'assert rotate_string("abcde", 5) == "abcde"'),
            Case(
                "more_than_length",
                'assert rotate_string("abcde", 7) == "deabc"\n    assert rotate_string("abc", 4) == "cab"',
            ),
            Case("empty", 'assert rotate_string("", 3) == ""'),
            Case("single_char", 'assert rotate_string("a", 4) == "a"'),
            Case("one", 'assert rotate_string("abcd", 1) == "dabc"'),
            Case("negative", 'assert rotate_string("abcde", -1) == "bcdea"'),
        ],
        [
            Bug(
                "    if not text:\n        return text\n",
                "",
                'rotate_string crashes on an empty string\n\n`rotate_string("", 2)` raises ZeroDivisionError but should '
                'return "".',
            ),
            Bug(
                "    k %= len(text)\n",
                "",
                'rotate_string is wrong for more than a full turn\n\n`rotate_string("abcde", 6)` returns "abcde" but '
                'should return "eabcd": rotating by k + len(text) is the same as rotating by k.',
            ),
            Bug(
                "text[-k:] + text[:-k]",
                "text[k:] + text[:k]",
                'rotate_string rotates the wrong way\n\n`rotate_string("abcde", 2)` returns "cdeab" but should return '
                '"deabc": a positive k moves the last characters to the front.',
            ),
        ],
    ),
    _f(
        "count_divisible",
        "divisibility",
        "count_divisible",
        '''
def count_divisible(numbers, d):
    """How many of numbers are divisible by d (d != 0)."""
    count = 0
    for n in numbers:
        if n % d == 0:
            count += 1
    return count
''',
        [
            Case("evens", "assert count_divisible([1, 2, 3, 4, 5, 6], 2) == 3"),
            Case("empty", "assert count_divisible([], 3) == 0"),
            Case("zero_is_divisible", "assert count_divisible([0], 5) == 1"),
            Case("negatives", "assert count_divisible([-4, -3, 4], 2) == 2"),
            Case(
                "one_of_two",
                "assert count_divisible([7, 11], 7) == 1\n    assert count_divisible([5, 10, 15], 5) == 3",
            ),
            Case("by_one", "assert count_divisible([1, 2], 1) == 2"),
            Case("negative_divisor", "assert count_divisible([3, 6, 7], -3) == 2"),
        ],
        [
            Bug(
                "if n % d == 0:",
                "if n % d:",
                "count_divisible counts the wrong numbers\n\n`count_divisible([2, 3, 4], 2)` returns 1 but should "
                "return 2: a number counts when d divides it.",
            ),
            Bug(
                "n % d == 0",
                "d % n == 0",
                "count_divisible tests divisibility the wrong way round\n\n`count_divisible([3, 9], 3)` returns 1 but "
                "should return 2: a number counts when it is a multiple of d.",
            ),
            Bug(
                "if n % d == 0:",
                "if n % d == 0 and n:",
                "count_divisible skips zero\n\n`count_divisible([0, 3], 3)` returns 1 but should return 2: zero is "
                "divisible by every d.",
            ),
            Bug(
                "count = 0",
                "count = 1",
                "count_divisible counts one too many\n\n`count_divisible([3, 4], 2)` returns 2 but should return 1.",
            ),
        ],
    ),
    _f(
        "interleave",
        "zipper",
        "interleave",
        '''
def interleave(a, b):
    """Items of a and b alternately, starting with a; the rest of the longer list comes at the end."""
    result = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            result.append(a[i])
        if i < len(b):
            result.append(b[i])
    return result
''',
        [
            Case("same_length", "assert interleave([1, 2, 3], [4, 5, 6]) == [1, 4, 2, 5, 3, 6]"),
            Case("both_empty", "assert interleave([], []) == []"),
            Case("one_empty", 'assert interleave([1], []) == [1]\n    assert interleave([], ["x"]) == ["x"]'),
            Case("first_longer", 'assert interleave([1, 2, 3], ["a"]) == [1, "a", 2, 3]'),
            Case("second_longer", 'assert interleave(["a"], [1, 2, 3]) == ["a", 1, 2, 3]'),
            Case("zeros", "assert interleave([0], [0]) == [0, 0]"),
            Case("two_and_one", "assert interleave([7, 8], [9]) == [7, 9, 8]"),
        ],
        [
            Bug(
                "range(max(len(a), len(b)))",
                "range(min(len(a), len(b)))",
                "interleave drops the rest of the longer list\n\n`interleave([1, 2, 3], [9])` returns [1, 9] but "
                "should return [1, 9, 2, 3].",
            ),
            Bug(
                "if i < len(b):",
                "if i < len(a):",
                "interleave fails when the second list is shorter\n\n`interleave([1, 2], [5])` raises IndexError but "
                "should return [1, 5, 2].",
            ),
            Bug(
                "if i < len(a):",
                "if i <= len(a):",
                "interleave fails when the first list is shorter\n\n`interleave([1], [5, 6])` raises IndexError but "
                "should return [1, 5, 6].",
            ),
            Bug(
                "        if i < len(a):\n            result.append(a[i])\n        if i < len(b):\n            result.append(b[i])\n",
                "        if i < len(b):\n            result.append(b[i])\n        if i < len(a):\n            result.append(a[i])\n",
                "interleave starts with the second list\n\n`interleave([1, 2], [8, 9])` returns [8, 1, 9, 2] but "
                "should return [1, 8, 2, 9]: items of the first list come first.",
            ),
        ],
    ),
    _f(
        "collatz_steps",
        "collatz",
        "collatz_steps",
        '''
def collatz_steps(n):
    """Steps for n >= 1 to reach 1, halving even numbers and turning odd ones into 3 * n + 1."""
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps
''',
        [
            Case("one", "assert collatz_steps(1) == 0"),
            Case("two", "assert collatz_steps(2) == 1"),
            Case("three", "assert collatz_steps(3) == 7"),
            Case("power_of_two", "assert collatz_steps(4) == 2\n    assert collatz_steps(16) == 4"),
            Case("six", "assert collatz_steps(6) == 8"),
            Case("seven", "assert collatz_steps(7) == 16"),
            Case("long", "assert collatz_steps(27) == 111"),
        ],
        [
            Bug(
                "steps = 0",
                "steps = 1",
                "collatz_steps counts one step too many\n\n`collatz_steps(4)` returns 3 but should return 2 "
                "(4 -> 2 -> 1).",
            ),
            Bug(
                "            n = 3 * n + 1\n        steps += 1",
                "            n = 3 * n + 1\n            steps += 1",
                "collatz_steps does not count the halving steps\n\n`collatz_steps(3)` returns 2 but should return 7 "
                "(3 -> 10 -> 5 -> 16 -> 8 -> 4 -> 2 -> 1).",
            ),
            Bug(
                "while n != 1:",
                "while n > 2:",
                "collatz_steps stops one step early\n\n`collatz_steps(6)` returns 7 but should return 8: the count "
                "ends when n reaches 1.",
            ),
        ],
    ),
    _f(
        "digital_root",
        "digit_roots",
        "digital_root",
        '''
def digital_root(n):
    """Sum the decimal digits of n >= 0, again and again, until a single digit remains."""
    while n >= 10:
        total = 0
        while n > 0:
            total += n % 10
            n //= 10
        n = total
    return n
''',
        [
            Case("zero", "assert digital_root(0) == 0"),
            Case("single_digit", "assert digital_root(7) == 7"),
            Case("ten", "assert digital_root(10) == 1"),
            Case("two_rounds", "assert digital_root(38) == 2\n    assert digital_root(99) == 9"),
            Case("nineteen", "assert digital_root(19) == 1"),
            Case("long", "assert digital_root(12345) == 6"),
            Case("three_rounds", "assert digital_root(9875) == 2"),
        ],
        [
            Bug(
                "while n >= 10:",
                "while n > 10:",
                "digital_root stops at 10\n\n`digital_root(55)` returns 10 but should return 1: summing goes on "
                "until one digit remains.",
            ),
            Bug(
                "while n >= 10:",
                "if n >= 10:",
                "digital_root sums the digits only once\n\n`digital_root(88)` returns 16 but should return 7 "
                "(8 + 8 = 16, then 1 + 6 = 7).",
            ),
            Bug(
                "total += n % 10",
                "total += n // 10",
                "digital_root adds the wrong parts of the number\n\n`digital_root(38)` returns 3 but should return 2 "
                "(3 + 8 = 11, then 1 + 1 = 2).",
            ),
        ],
    ),
    _f(
        "caesar_shift",
        "caesar",
        "caesar_shift",
        '''
def caesar_shift(text, k):
    """Shift lowercase letters k places along the alphabet, wrapping from z to a; other characters stay."""
    result = ""
    for ch in text:
        if "a" <= ch <= "z":
            ch = chr((ord(ch) - ord("a") + k) % 26 + ord("a"))
        result += ch
    return result
''',
        [
            Case("by_one", 'assert caesar_shift("abc", 1) == "bcd"'),
            Case("wraps", 'assert caesar_shift("xyz", 3) == "abc"'),
            Case("empty", 'assert caesar_shift("", 5) == ""'),
            Case("rot13", 'assert caesar_shift("hello, world!", 13) == "uryyb, jbeyq!"'),
            Case("zero", 'assert caesar_shift("abc", 0) == "abc"\n    assert caesar_shift("z", 26) == "z"'),
            Case("backwards", 'assert caesar_shift("bcd", -1) == "abc"'),
            Case("keeps_others", 'assert caesar_shift("Hi a1", 1) == "Hj b1"'),
        ],
        [
            Bug(
                "% 26",
                "% 25",
                'caesar_shift wraps to the wrong letter\n\n`caesar_shift("xyz", 3)` returns "bcd" but should return '
                '"abc": after z comes a again.',
            ),
            Bug(
                'chr((ord(ch) - ord("a") + k) % 26 + ord("a"))',
                "chr(ord(ch) + k)",
                'caesar_shift does not wrap around\n\n`caesar_shift("xyz", 3)` returns "{|}" but should return "abc": '
                "shifting past z starts again at a.",
            ),
            Bug(
                'if "a" <= ch <= "z":',
                "if ch.isalpha():",
                'caesar_shift garbles capital letters\n\n`caesar_shift("Hi", 1)` returns "cj" but should return "Hj": '
                "only lowercase letters are shifted.",
            ),
            Bug(
                '+ ord("a"))\n        result += ch',
                '+ ord("a"))\n            result += ch',
                'caesar_shift drops spaces and punctuation\n\n`caesar_shift("a b!", 1)` returns "bc" but should '
                'return "b c!": characters that are not lowercase letters are kept as they are.',
            ),
        ],
    ),
    _f(
        "letter_histogram",
        "histogram",
        "letter_histogram",
        '''
def letter_histogram(text):
    """How often each letter occurs in text, ignoring case: {letter: count}; other characters are ignored."""
    counts = {}
    for ch in text.lower():
        if ch.isalpha():
            counts[ch] = counts.get(ch, 0) + 1
    return counts
''',
        [
            Case("empty", 'assert letter_histogram("") == {}'),
            Case("repeats", 'assert letter_histogram("aab") == {"a": 2, "b": 1}'),
            Case("ignores_case", 'assert letter_histogram("Aa") == {"a": 2}'),
            Case(
                "ignores_others",
                'assert letter_histogram("a b!") == {"a": 1, "b": 1}\n    assert letter_histogram("123") == {}',
            ),
            Case("word", 'assert letter_histogram("Hello") == {"h": 1, "e": 1, "l": 2, "o": 1}'),
            Case("single", 'assert letter_histogram("x") == {"x": 1}'),
            Case("many", 'assert letter_histogram("banana") == {"b": 1, "a": 3, "n": 2}'),
        ],
        [
            Bug(
                "text.lower()",
                "text",
                'letter_histogram counts capitals separately\n\n`letter_histogram("Bob")` returns {"B": 1, "o": 1, '
                '"b": 1} but should return {"b": 2, "o": 1}: case is ignored.',
            ),
            Bug(
                "if ch.isalpha():",
                'if ch != " ":',
                'letter_histogram counts punctuation\n\n`letter_histogram("hi!")` returns {"h": 1, "i": 1, "!": 1} '
                'but should return {"h": 1, "i": 1}: only letters are counted.',
            ),
            Bug(
                "counts.get(ch, 0) + 1",
                "1",
                'letter_histogram never counts past one\n\n`letter_histogram("aaa")` returns {"a": 1} but should '
                'return {"a": 3}.',
            ),
            Bug(
                "counts.get(ch, 0)",
                "counts.get(ch, 1)",
                'letter_histogram counts one too many\n\n`letter_histogram("ab")` returns {"a": 2, "b": 2} but should '
                'return {"a": 1, "b": 1}.',
            ),
        ],
    ),
    _f(
        "count_negative",
        "negatives",
        "count_negative",
        '''
def count_negative(numbers):
    """How many of the numbers are below zero."""
    count = 0
    for n in numbers:
        if n < 0:
            count += 1
    return count
''',
        [
            Case("empty", "assert count_negative([]) == 0"),
            Case("none", "assert count_negative([1, 2]) == 0"),
            Case("all", "assert count_negative([-1, -2]) == 2"),
            Case(
                "zero_is_not_negative",
                "assert count_negative([0]) == 0\n    assert count_negative([-3, 0, 3]) == 1",
            ),
            Case("fraction", "assert count_negative([-0.5, 2]) == 1"),
            Case("mixed", "assert count_negative([-1, -1, 5, -7]) == 3"),
            Case("single", "assert count_negative([-9]) == 1"),
        ],
        [
            Bug(
                "if n < 0:",
                "if n <= 0:",
                "count_negative counts zero\n\n`count_negative([0, -2, 4])` returns 2 but should return 1: zero is "
                "not negative.",
            ),
            Bug(
                "if n < 0:",
                "if n > 0:",
                "count_negative counts the positive numbers\n\n`count_negative([-1, 2, 3])` returns 2 but should "
                "return 1.",
            ),
            Bug(
                "count += 1",
                "count += n",
                "count_negative adds the numbers up\n\n`count_negative([-4, 1])` returns -4 but should return 1: it "
                "counts how many numbers are negative.",
            ),
            Bug(
                "            count += 1\n    return count",
                "            count += 1\n        return count",
                "count_negative only looks at the first number\n\n`count_negative([2, -1, -8])` returns 0 but should "
                "return 2.",
            ),
        ],
    ),
    _f(
        "strip_punctuation",
        "depunct",
        "strip_punctuation",
        '''
def strip_punctuation(word):
    """word without the punctuation marks . , ; : ! ? ' " at its start and end; inner ones are kept."""
    marks = ".,;:!?'\\""
    start = 0
    end = len(word)
    while start < end and word[start] in marks:
        start += 1
    while end > start and word[end - 1] in marks:
        end -= 1
    return word[start:end]
''',
        [
            Case("plain", 'assert strip_punctuation("hello") == "hello"'),
            Case(
                "trailing",
                'assert strip_punctuation("hello!") == "hello"\n    assert strip_punctuation("end.") == "end"',
            ),
            Case("both_ends", 'assert strip_punctuation("...wait...") == "wait"'),
            Case("inner_kept", 'assert strip_punctuation("don\'t") == "don\'t"'),
            Case("empty", 'assert strip_punctuation("") == ""'),
            Case("only_marks", 'assert strip_punctuation("!?!") == ""'),
            Case("quotes", 'assert strip_punctuation("\'quoted\'") == "quoted"'),
            Case("double_quotes", 'assert strip_punctuation(\'"yes,"\') == "yes"'),
        ],
        [
            Bug(
                "while start < end and word[start] in marks:",
                "while word[start] in marks:",
                'strip_punctuation crashes on words made of punctuation\n\n`strip_punctuation("?!")` raises '
                'IndexError but should return "".',
            ),
            Bug(
                "return word[start:end]",
                "return word[start:]",
                'strip_punctuation keeps trailing punctuation\n\n`strip_punctuation("yes!")` returns "yes!" but '
                'should return "yes": marks are removed from both ends.',
            ),
            Bug(
                "end = len(word)",
                "end = len(word) - 1",
                'strip_punctuation loses the last letter\n\n`strip_punctuation("cat")` returns "ca" but should return '
                '"cat".',
            ),
            Bug(
                "while end > start and word[end - 1] in marks:",
                "while end > start and word[end] in marks:",
                'strip_punctuation crashes on most words\n\n`strip_punctuation("ok")` raises IndexError but should '
                'return "ok".',
            ),
        ],
    ),
    _f(
        "sum_of_squares",
        "square_sums",
        "sum_of_squares",
        '''
def sum_of_squares(numbers):
    """Sum of the squares of the numbers (0 for an empty list)."""
    total = 0
    for n in numbers:
        total += n * n
    return total
''',
        [
            Case("empty", "assert sum_of_squares([]) == 0"),
            Case("single", "assert sum_of_squares([3]) == 9"),
            Case("three", "assert sum_of_squares([1, 2, 3]) == 14"),
            Case("negatives", "assert sum_of_squares([-2, 3]) == 13\n    assert sum_of_squares([-1]) == 1"),
            Case("zeros", "assert sum_of_squares([0, 0]) == 0"),
            Case("fraction", "assert sum_of_squares([0.5]) == 0.25"),
            Case("twos", "assert sum_of_squares([2, 2]) == 8"),
        ],
        [
            Bug(
                "n * n",
                "n * 2",
                "sum_of_squares doubles instead of squaring\n\n`sum_of_squares([1, 2, 3])` returns 12 but should "
                "return 14 (1 + 4 + 9).",
            ),
            Bug(
                "total += n * n",
                "total = n * n",
                "sum_of_squares keeps only the last square\n\n`sum_of_squares([1, 2, 3])` returns 9 but should "
                "return 14 (1 + 4 + 9).",
            ),
            Bug(
                "total = 0",
                "total = 1",
                "sum_of_squares is one too large\n\n`sum_of_squares([1, 2])` returns 6 but should return 5.",
            ),
            Bug(
                "total += n * n",
                "total += n * n if n > 0 else 0",
                "sum_of_squares ignores negative numbers\n\n`sum_of_squares([-3, 1])` returns 1 but should return "
                "10: a negative number has a positive square.",
            ),
        ],
    ),
    _f(
        "nth_root_int",
        "int_roots",
        "nth_root_int",
        '''
def nth_root_int(x, n):
    """The largest integer r >= 0 with r ** n <= x, for x >= 0 and n >= 1."""
    r = 0
    while (r + 1) ** n <= x:
        r += 1
    return r
''',
        [
            Case("zero", "assert nth_root_int(0, 2) == 0"),
            Case("one", "assert nth_root_int(1, 3) == 1"),
            Case("exact_cube", "assert nth_root_int(8, 3) == 2\n    assert nth_root_int(27, 3) == 3"),
            Case("below_cube", "assert nth_root_int(26, 3) == 2"),
            Case("square_root", "assert nth_root_int(99, 2) == 9"),
            Case("exact_square", "assert nth_root_int(100, 2) == 10"),
            Case("first_root", "assert nth_root_int(5, 1) == 5"),
            Case("sixth_root", "assert nth_root_int(1000000, 6) == 10"),
        ],
        [
            Bug(
                "(r + 1) ** n <= x",
                "(r + 1) ** n < x",
                "nth_root_int is one too small for exact powers\n\n`nth_root_int(16, 2)` returns 3 but should "
                "return 4: 4 ** 2 is exactly 16.",
            ),
            Bug(
                "(r + 1) ** n <= x",
                "r ** n <= x",
                "nth_root_int is one too large\n\n`nth_root_int(10, 2)` returns 4 but should return 3: 4 ** 2 is "
                "more than 10.",
            ),
            Bug(
                "(r + 1) ** n",
                "(r + 1) * n",
                "nth_root_int multiplies instead of taking powers\n\n`nth_root_int(64, 3)` returns 21 but should "
                "return 4.",
            ),
        ],
    ),
    _f(
        "alternate_case",
        "zigzag_case",
        "alternate_case",
        '''
def alternate_case(text):
    """Letters alternately upper- and lowercase, starting with uppercase; other characters are kept and skipped."""
    result = ""
    upper = True
    for ch in text:
        if ch.isalpha():
            result += ch.upper() if upper else ch.lower()
            upper = not upper
        else:
            result += ch
    return result
''',
        [
            Case("empty", 'assert alternate_case("") == ""'),
            Case("lower", 'assert alternate_case("abcd") == "AbCd"'),
            Case("upper", 'assert alternate_case("ABCD") == "AbCd"'),
            Case("spaces_skipped", 'assert alternate_case("a b c") == "A b C"'),
            Case("single", 'assert alternate_case("x") == "X"'),
            Case(
                "digits_skipped",
                'assert alternate_case("hi 2 you") == "Hi 2 YoU"\n    assert alternate_case("123") == "123"',
            ),
            Case("odd_length", 'assert alternate_case("hello") == "HeLlO"'),
        ],
        [
            Bug(
                "upper = True",
                "upper = False",
                'alternate_case starts with lowercase\n\n`alternate_case("abcd")` returns "aBcD" but should return '
                '"AbCd": the first letter is uppercase.',
            ),
            Bug(
                "            upper = not upper\n        else:\n            result += ch\n",
                "        else:\n            result += ch\n        upper = not upper\n",
                'alternate_case lets spaces take a turn\n\n`alternate_case("a b")` returns "A B" but should return '
                '"A b": only letters alternate, other characters are skipped.',
            ),
            Bug(
                "ch.upper() if upper else ch.lower()",
                "ch.upper() if upper else ch",
                'alternate_case leaves capitals in place\n\n`alternate_case("HELLO")` returns "HELLO" but should '
                'return "HeLlO".',
            ),
            Bug(
                "        else:\n            result += ch\n",
                "",
                'alternate_case drops spaces and digits\n\n`alternate_case("a 1")` returns "A" but should return '
                '"A 1": characters that are not letters are kept.',
            ),
        ],
    ),
    _f(
        "is_power_of_two",
        "twos",
        "is_power_of_two",
        '''
def is_power_of_two(n):
    """True if n is 2 ** k for some integer k >= 0 (1, 2, 4, 8, ...)."""
    power = 1
    while power < n:
        power *= 2
    return power == n
''',
        [
            Case("one", "assert is_power_of_two(1) is True"),
            Case("two", "assert is_power_of_two(2) is True"),
            Case("eight", "assert is_power_of_two(8) is True\n    assert is_power_of_two(1024) is True"),
            Case("zero", "assert is_power_of_two(0) is False"),
            Case("negative", "assert is_power_of_two(-4) is False"),
            Case("six", "assert is_power_of_two(6) is False"),
            Case("three", "assert is_power_of_two(3) is False"),
            Case("twelve", "assert is_power_of_two(12) is False"),
        ],
        [
            Bug(
                "while power < n:",
                "while power <= n:",
                "is_power_of_two rejects powers of two\n\n`is_power_of_two(16)` returns False but should return True.",
            ),
            Bug(
                "power *= 2",
                "power += 2",
                "is_power_of_two accepts odd numbers\n\n`is_power_of_two(5)` returns True but should return False, "
                "and powers of two such as 4 are rejected.",
            ),
            Bug(
                "return power == n",
                "return power >= n",
                "is_power_of_two accepts every number\n\n`is_power_of_two(10)` returns True but should return False: "
                "only 1, 2, 4, 8, ... are powers of two.",
            ),
        ],
    ),
    _f(
        "merge_sorted",
        "merging",
        "merge_sorted",
        '''
def merge_sorted(a, b):
    """One sorted list of the items of the sorted lists a and b."""
    result = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            result.append(a[i])
            i += 1
        else:
            result.append(b[j])
            j += 1
    return result + a[i:] + b[j:]
''',
        [
            Case("interleaved", "assert merge_sorted([1, 3, 5], [2, 4, 6]) == [1, 2, 3, 4, 5, 6]"),
            Case("both_empty", "assert merge_sorted([], []) == []"),
            Case(
                "one_empty",
                "assert merge_sorted([1, 2], []) == [1, 2]\n    assert merge_sorted([], [3]) == [3]",
            ),
            Case("duplicates", "assert merge_sorted([1, 1], [1]) == [1, 1, 1]"),
            Case("second_first", "assert merge_sorted([5], [1, 2, 3]) == [1, 2, 3, 5]"),
            Case("negatives", "assert merge_sorted([-3, 0], [-1]) == [-3, -1, 0]"),
            Case("already_ordered", "assert merge_sorted([1, 2], [3, 4]) == [1, 2, 3, 4]"),
        ],
        [
            Bug(
                "result + a[i:] + b[j:]",
                "result + a[i:]",
                "merge_sorted drops the end of the second list\n\n`merge_sorted([1], [2, 3])` returns [1] but should "
                "return [1, 2, 3].",
            ),
            Bug(
                "return result + a[i:] + b[j:]",
                "return result",
                "merge_sorted loses the last items\n\n`merge_sorted([1, 4], [2, 3])` returns [1, 2, 3] but should "
                "return [1, 2, 3, 4]: items left in either list after the other runs out belong at the end.",
            ),
            Bug(
                "if a[i] <= b[j]:",
                "if a[i] >= b[j]:",
                "merge_sorted returns an unsorted list\n\n`merge_sorted([1, 3], [2, 4])` returns [2, 4, 1, 3] but "
                "should return [1, 2, 3, 4].",
            ),
            Bug(
                "while i < len(a) and j < len(b):",
                "while i < len(a) or j < len(b):",
                "merge_sorted crashes when one list runs out\n\n`merge_sorted([1], [2, 3])` raises IndexError but "
                "should return [1, 2, 3].",
            ),
        ],
    ),
)

# Families sharing an idiom with another family, here or in ``micro_families.py`` (the same loop with the comparison
# turned round, the inverse conversion, the same slicing or counting pattern): family name -> a related family,
# merged into ``RELATED`` so that a group stays on one side of the family split.
MORE_RELATED: dict[str, str] = {
    "word_lengths": "count_words", "count_upper": "count_vowels", "snake_to_camel": "capitalize",
    "camel_to_snake": "snake_to_camel", "int_to_binary": "binary_to_int", "is_perfect_square": "nth_root_int",
    "triangular_number": "sum_range", "mean_of_positives": "average", "longest_word": "max_value",
    "rotate_string": "rotate_left", "count_divisible": "sum_evens", "count_negative": "count_positive",
    "digital_root": "digit_sum", "sum_of_squares": "square_all", "interleave": "merge_sorted",
}  # fmt: skip
