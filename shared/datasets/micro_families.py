"""The function families of the ``swe_micro`` dataset: data only (``shared/datasets/micro.py`` generates tasks).

A family is one small, correct Python function in its own module, a list of behaviour cases (each becomes one
pytest test of the hidden spec; a case is one or more ``assert`` lines) and three or more bug variations. A
variation is one textual edit that turns the correct source into the buggy base of a task, plus the issue text a
user would file about it: a title line, a blank line, one quoted example and the expected behaviour. ``micro.py``
runs the cases to find which the bug breaks (FAIL_TO_PASS) and refuses a defective task: a bug that breaks no case,
a correct source that fails one, fewer than five asserts, or no failing assert on an input the issue does not
quote (so the cases hold edge cases and more inputs than any issue shows).

``micro.py`` also splits the families: ``train``/``eval`` hold out whole families (and their ``RELATED`` ones), so
an eval task's function, reference fix and tests are ones the policy never trained on; ``seen_train``/``seen_eval``
(``SEEN_SPLIT_FAMILIES``) is the bug split diagnostic over functions seen in training. ``micro_families_more.py``
holds more families in this form.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    """Test function name without ``test_``."""
    check: str
    """The test body: one or more Python statements (assert ...) using the function."""


@dataclass(frozen=True)
class Bug:
    old: str
    """Text of the correct source that the bug replaces (must occur exactly once)."""
    new: str
    statement: str
    """The issue: a title line, a blank line, and what is wrong and what is expected."""


@dataclass(frozen=True)
class Family:
    name: str
    module: str
    function: str
    source: str
    cases: tuple[Case, ...]
    bugs: tuple[Bug, ...]


def _f(name: str, module: str, function: str, source: str, cases: list[Case], bugs: list[Bug]) -> Family:
    return Family(name, module, function, source.strip("\n") + "\n", tuple(cases), tuple(bugs))


FAMILIES: tuple[Family, ...] = (
    _f(
        "clamp",
        "ranges",
        "clamp",
        '''
def clamp(value, low, high):
    """Limit value to the range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
''',
        [
            Case("inside", "assert clamp(5, 0, 10) == 5"),
            Case("above_high", "assert clamp(15, 0, 10) == 10"),
            Case("below_low", "assert clamp(-3, 0, 10) == 0"),
            Case("edges", "assert clamp(0, 0, 10) == 0\n    assert clamp(10, 0, 10) == 10"),
            Case("far_above", "assert clamp(100, -5, 5) == 5"),
            Case("far_below", "assert clamp(-50, -5, 5) == -5"),
            Case("inside_negative", "assert clamp(-2, -5, 5) == -2"),
        ],
        [
            Bug(
                "        return high\n",
                "        return value\n",
                "clamp does not limit large values\n\n`clamp(15, 0, 10)` returns 15 but should return 10: a value "
                "above `high` must become `high`.",
            ),
            Bug(
                "        return low\n",
                "        return value\n",
                "clamp does not limit small values\n\n`clamp(-3, 0, 10)` returns -3 but should return 0: a value "
                "below `low` must become `low`.",
            ),
            Bug(
                "        return low\n",
                "        return high\n",
                "clamp returns the wrong bound for small values\n\n`clamp(-3, 0, 10)` returns 10 but should "
                "return 0: a value below `low` must become `low`, not `high`.",
            ),
            Bug(
                "    return value\n",
                "    return low\n",
                "clamp loses values inside the range\n\n`clamp(5, 0, 10)` returns 0 but should return 5: a value "
                "between `low` and `high` must be returned unchanged.",
            ),
        ],
    ),
    _f(
        "count_vowels",
        "letters",
        "count_vowels",
        '''
def count_vowels(text):
    """Number of vowels (a, e, i, o, u, either case) in text."""
    return sum(1 for ch in text.lower() if ch in "aeiou")
''',
        [
            Case("lowercase", 'assert count_vowels("banana") == 3'),
            Case("uppercase", 'assert count_vowels("APPLE") == 2'),
            Case("all_vowels", 'assert count_vowels("education") == 5'),
            Case("no_vowels", 'assert count_vowels("rhythm") == 0'),
            Case("sentence", 'assert count_vowels("Hello World") == 3'),
            Case("empty", 'assert count_vowels("") == 0'),
            Case("capital_u", 'assert count_vowels("Ubuntu") == 3'),
        ],
        [
            Bug(
                "text.lower()",
                "text",
                'count_vowels ignores capital letters\n\n`count_vowels("APPLE")` returns 0 but should return 2: '
                "vowels count in either case.",
            ),
            Bug(
                '"aeiou"',
                '"aeio"',
                'count_vowels misses the letter u\n\n`count_vowels("education")` returns 4 but should return 5: '
                "a, e, i, o and u are all vowels.",
            ),
            Bug(
                "if ch in",
                "if ch not in",
                'count_vowels counts consonants\n\n`count_vowels("banana")` returns 3 by luck, but '
                '`count_vowels("rhythm")` returns 6 instead of 0: only vowels must be counted.',
            ),
            Bug(
                "sum(1 for",
                "sum(2 for",
                'count_vowels counts every vowel twice\n\n`count_vowels("banana")` returns 6 but should return 3.',
            ),
        ],
    ),
    _f(
        "leap_year",
        "calendar_rules",
        "is_leap_year",
        '''
def is_leap_year(year):
    """True for leap years of the Gregorian calendar."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
''',
        [
            Case("ordinary_leap", "assert is_leap_year(2024) is True"),
            Case("common_year", "assert is_leap_year(2023) is False"),
            Case("century", "assert is_leap_year(1900) is False"),
            Case("four_hundred", "assert is_leap_year(2000) is True"),
            Case("year_2400", "assert is_leap_year(2400) is True"),
            Case("century_2100", "assert is_leap_year(2100) is False"),
            Case("year_1996", "assert is_leap_year(1996) is True"),
            Case("year_2019", "assert is_leap_year(2019) is False"),
        ],
        [
            Bug(
                " or year % 400 == 0",
                "",
                "is_leap_year is wrong for 2000\n\n`is_leap_year(2000)` returns False but should return True: "
                "years divisible by 400 are leap years.",
            ),
            Bug(
                "year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)",
                "year % 4 == 0",
                "is_leap_year is wrong for 1900\n\n`is_leap_year(1900)` returns True but should return False: "
                "a century is a leap year only if it is divisible by 400.",
            ),
            Bug(
                "year % 4 == 0 and",
                "year % 4 == 1 and",
                "is_leap_year is wrong for 2024\n\n`is_leap_year(2024)` returns False but should return True: "
                "years divisible by 4 are leap years (except centuries not divisible by 400).",
            ),
            Bug(
                "year % 4 == 0 and (",
                "year % 4 == 0 or (",
                "is_leap_year is wrong for 2023\n\n`is_leap_year(2023)` returns True but should return False: "
                "a year must be divisible by 4 to be a leap year.",
            ),
        ],
    ),
    _f(
        "sum_evens",
        "evens",
        "sum_of_evens",
        '''
def sum_of_evens(numbers):
    """Sum of the even numbers in the list."""
    return sum(n for n in numbers if n % 2 == 0)
''',
        [
            Case("mixed", "assert sum_of_evens([1, 2, 3, 4]) == 6"),
            Case("all_odd", "assert sum_of_evens([1, 3, 5]) == 0"),
            Case("empty", "assert sum_of_evens([]) == 0"),
            Case("negatives", "assert sum_of_evens([-2, -3, 10]) == 8"),
            Case("zeros", "assert sum_of_evens([0, 0, 7]) == 0"),
            Case("larger", "assert sum_of_evens([10, 11, 12]) == 22"),
            Case("negative_only", "assert sum_of_evens([-4, -6]) == -10"),
        ],
        [
            Bug(
                "n % 2 == 0",
                "n % 2 == 1",
                "sum_of_evens adds the odd numbers\n\n`sum_of_evens([1, 2, 3, 4])` returns 4 but should return 6: "
                "only even numbers must be added.",
            ),
            Bug(
                " if n % 2 == 0",
                "",
                "sum_of_evens adds every number\n\n`sum_of_evens([1, 2, 3, 4])` returns 10 but should return 6: "
                "odd numbers must be skipped.",
            ),
            Bug(
                "sum(n for",
                "sum(1 for",
                "sum_of_evens counts instead of adding\n\n`sum_of_evens([1, 2, 3, 4])` returns 2 but should "
                "return 6, the sum 2 + 4.",
            ),
            Bug(
                "n % 2 == 0",
                "n % 2 == 0 and n > 0",
                "sum_of_evens skips negative even numbers\n\n`sum_of_evens([-2, -3, 10])` returns 10 but should "
                "return 8: negative even numbers count too.",
            ),
        ],
    ),
    _f(
        "factorial",
        "combinatorics",
        "factorial",
        '''
def factorial(n):
    """n! for n >= 0."""
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result
''',
        [
            Case("zero", "assert factorial(0) == 1"),
            Case("one", "assert factorial(1) == 1"),
            Case("five", "assert factorial(5) == 120"),
            Case("three", "assert factorial(3) == 6"),
            Case("four", "assert factorial(4) == 24"),
            Case("six", "assert factorial(6) == 720"),
        ],
        [
            Bug(
                "range(2, n + 1)",
                "range(2, n)",
                "factorial stops one factor early\n\n`factorial(5)` returns 24 but should return 120.",
            ),
            Bug(
                "result = 1\n",
                "result = 0\n",
                "factorial returns 0\n\n`factorial(5)` returns 0 but should return 120, and `factorial(0)` should "
                "be 1.",
            ),
            Bug(
                "result *= i",
                "result += i",
                "factorial adds instead of multiplying\n\n`factorial(5)` returns 15 but should return 120 "
                "(1 * 2 * 3 * 4 * 5).",
            ),
            Bug(
                "    return result\n",
                "    return n\n",
                "factorial returns its argument\n\n`factorial(5)` returns 5 but should return 120.",
            ),
        ],
    ),
    _f(
        "reverse_words",
        "sentences",
        "reverse_words",
        '''
def reverse_words(sentence):
    """The words of sentence in reverse order, joined by single spaces."""
    return " ".join(reversed(sentence.split()))
''',
        [
            Case("two_words", 'assert reverse_words("hello world") == "world hello"'),
            Case("three_words", 'assert reverse_words("a b c") == "c b a"'),
            Case("extra_spaces", 'assert reverse_words("  one   two ") == "two one"'),
            Case("single", 'assert reverse_words("alone") == "alone"'),
            Case("four_words", 'assert reverse_words("one two three four") == "four three two one"'),
            Case("empty", 'assert reverse_words("") == ""'),
            Case("leading_space", 'assert reverse_words(" x y") == "y x"'),
        ],
        [
            Bug(
                '" ".join(reversed(sentence.split()))',
                "sentence[::-1]",
                'reverse_words reverses letters\n\n`reverse_words("hello world")` returns "dlrow olleh" but '
                'should return "world hello": the order of the words is reversed, not the letters.',
            ),
            Bug(
                '" ".join(',
                '"".join(',
                'reverse_words loses the spaces\n\n`reverse_words("hello world")` returns "worldhello" but '
                'should return "world hello".',
            ),
            Bug(
                "reversed(sentence.split())",
                "sentence.split()",
                'reverse_words keeps the order\n\n`reverse_words("a b c")` returns "a b c" but should return '
                '"c b a".',
            ),
            Bug(
                "sentence.split()",
                'sentence.split(" ")',
                'reverse_words keeps empty words\n\n`reverse_words("  one   two ")` returns extra spaces but '
                'should return "two one": runs of spaces separate words.',
            ),
        ],
    ),
    _f(
        "fahrenheit",
        "temperature",
        "to_fahrenheit",
        '''
def to_fahrenheit(celsius):
    """Degrees Celsius in degrees Fahrenheit."""
    return celsius * 9 / 5 + 32
''',
        [
            Case("freezing", "assert to_fahrenheit(0) == 32"),
            Case("boiling", "assert to_fahrenheit(100) == 212"),
            Case("minus_forty", "assert to_fahrenheit(-40) == -40"),
            Case("body", "assert to_fahrenheit(37) == pytest.approx(98.6)"),
            Case("ten", "assert to_fahrenheit(10) == 50"),
            Case("minus_ten", "assert to_fahrenheit(-10) == 14"),
        ],
        [
            Bug(
                "+ 32",
                "- 32",
                "to_fahrenheit subtracts the offset\n\n`to_fahrenheit(0)` returns -32 but should return 32.",
            ),
            Bug(
                "celsius * 9 / 5",
                "celsius * 5 / 9",
                "to_fahrenheit uses the inverse ratio\n\n`to_fahrenheit(100)` returns about 87.6 but should return 212: "
                "multiply by 9/5.",
            ),
            Bug(
                " + 32",
                "",
                "to_fahrenheit forgets the offset\n\n`to_fahrenheit(0)` returns 0 but should return 32.",
            ),
            Bug(
                "+ 32",
                "+ 23",
                "to_fahrenheit uses the wrong offset\n\n`to_fahrenheit(0)` returns 23 but should return 32.",
            ),
        ],
    ),
    _f(
        "max_value",
        "extremes",
        "max_value",
        '''
def max_value(numbers):
    """The largest number of the list, or None for an empty list."""
    if not numbers:
        return None
    best = numbers[0]
    for n in numbers[1:]:
        if n > best:
            best = n
    return best
''',
        [
            Case("unsorted", "assert max_value([3, 9, 2]) == 9"),
            Case("negatives", "assert max_value([-5, -2, -9]) == -2"),
            Case("empty", "assert max_value([]) is None"),
            Case("single", "assert max_value([7]) == 7"),
            Case("duplicates", "assert max_value([4, 4, 1]) == 4"),
            Case("last_largest", "assert max_value([1, 2, 8]) == 8"),
            Case("two_negatives", "assert max_value([-10, -7]) == -7"),
            Case("empty_tuple", "assert max_value(()) is None"),
        ],
        [
            Bug(
                "if n > best:",
                "if n < best:",
                "max_value returns the smallest number\n\n`max_value([3, 9, 2])` returns 2 but should return 9.",
            ),
            Bug(
                "best = numbers[0]",
                "best = 0",
                "max_value is wrong for negative numbers\n\n`max_value([-5, -2, -9])` returns 0 but should return "
                "-2.",
            ),
            Bug(
                "    if not numbers:\n        return None\n",
                "",
                "max_value crashes on an empty list\n\n`max_value([])` raises IndexError but should return None.",
            ),
            Bug(
                "            best = n\n",
                "            best = numbers[0]\n",
                "max_value returns the first number\n\n`max_value([3, 9, 2])` returns 3 but should return 9.",
            ),
        ],
    ),
    _f(
        "palindrome",
        "mirror",
        "is_palindrome",
        '''
def is_palindrome(text):
    """True if text reads the same backwards, ignoring case, spaces and punctuation."""
    cleaned = [ch.lower() for ch in text if ch.isalnum()]
    return cleaned == cleaned[::-1]
''',
        [
            Case("simple", 'assert is_palindrome("level") is True'),
            Case("mixed_case", 'assert is_palindrome("Racecar") is True'),
            Case("sentence", 'assert is_palindrome("Never odd or even") is True'),
            Case("not_palindrome", 'assert is_palindrome("python") is False'),
            Case("punctuation", 'assert is_palindrome("A man, a plan, a canal: Panama") is True'),
            Case("hello", 'assert is_palindrome("Hello") is False'),
            Case("empty", 'assert is_palindrome("") is True'),
            Case("capital_word", 'assert is_palindrome("Noon") is True'),
        ],
        [
            Bug(
                "ch.lower() for",
                "ch for",
                'is_palindrome is case sensitive\n\n`is_palindrome("Racecar")` returns False but should return '
                "True: case must be ignored.",
            ),
            Bug(
                " if ch.isalnum()",
                "",
                'is_palindrome does not ignore spaces\n\n`is_palindrome("Never odd or even")` returns False but '
                "should return True: spaces and punctuation must be ignored.",
            ),
            Bug(
                "cleaned == cleaned[::-1]",
                "cleaned == cleaned",
                'is_palindrome accepts everything\n\n`is_palindrome("python")` returns True but should return '
                "False.",
            ),
            Bug(
                "cleaned == cleaned[::-1]",
                "cleaned != cleaned[::-1]",
                'is_palindrome answers the opposite\n\n`is_palindrome("level")` returns False but should return '
                'True, and `is_palindrome("python")` should be False.',
            ),
        ],
    ),
    _f(
        "digit_sum",
        "digits",
        "digit_sum",
        '''
def digit_sum(n):
    """Sum of the decimal digits of the integer n (the sign is ignored)."""
    return sum(int(d) for d in str(abs(n)))
''',
        [
            Case("positive", "assert digit_sum(123) == 6"),
            Case("negative", "assert digit_sum(-45) == 9"),
            Case("zero", "assert digit_sum(0) == 0"),
            Case("large", "assert digit_sum(9081) == 18"),
            Case("negative_large", "assert digit_sum(-909) == 18"),
            Case("single", "assert digit_sum(7) == 7"),
        ],
        [
            Bug(
                "str(abs(n))",
                "str(n)",
                "digit_sum crashes on negative numbers\n\n`digit_sum(-45)` raises ValueError but should return 9: "
                "the sign is ignored.",
            ),
            Bug(
                "sum(int(d) for d in str(abs(n)))",
                "len(str(abs(n)))",
                "digit_sum counts the digits\n\n`digit_sum(123)` returns 3 but should return 6 (1 + 2 + 3).",
            ),
            Bug(
                "sum(int(d) for",
                "sum(int(d) * 2 for",
                "digit_sum doubles the result\n\n`digit_sum(123)` returns 12 but should return 6.",
            ),
            Bug(
                "sum(int(d) for",
                "sum(1 + int(d) for",
                "digit_sum adds one per digit\n\n`digit_sum(123)` returns 9 but should return 6.",
            ),
        ],
    ),
    _f(
        "capitalize",
        "titles",
        "capitalize_words",
        '''
def capitalize_words(text):
    """Every word of text with its first letter upper case and the rest lower case."""
    return " ".join(word.capitalize() for word in text.split())
''',
        [
            Case("two_words", 'assert capitalize_words("hello world") == "Hello World"'),
            Case("shouting", 'assert capitalize_words("GOOD MORNING") == "Good Morning"'),
            Case("one_word", 'assert capitalize_words("python") == "Python"'),
            Case("spaces", 'assert capitalize_words("a  b") == "A B"'),
            Case("mixed_case", 'assert capitalize_words("hELLO tHERE") == "Hello There"'),
            Case("leading_spaces", 'assert capitalize_words("  big cat") == "Big Cat"'),
        ],
        [
            Bug(
                "word.capitalize()",
                "word.upper()",
                'capitalize_words shouts\n\n`capitalize_words("hello world")` returns "HELLO WORLD" but should '
                'return "Hello World".',
            ),
            Bug(
                "word.capitalize()",
                "word.lower()",
                'capitalize_words lowers everything\n\n`capitalize_words("hello world")` returns "hello world" '
                'but should return "Hello World".',
            ),
            Bug(
                '" ".join(',
                '"".join(',
                'capitalize_words glues the words\n\n`capitalize_words("hello world")` returns "HelloWorld" '
                'but should return "Hello World".',
            ),
            Bug(
                "text.split()",
                'text.split(" ")',
                'capitalize_words keeps double spaces\n\n`capitalize_words("a  b")` returns "A  B" but should '
                'return "A B": words are separated by single spaces.',
            ),
        ],
    ),
    _f(
        "average",
        "means",
        "average",
        '''
def average(numbers):
    """Arithmetic mean of the list, or 0.0 for an empty list."""
    if not numbers:
        return 0.0
    return sum(numbers) / len(numbers)
''',
        [
            Case("whole", "assert average([2, 4, 6]) == 4"),
            Case("fraction", "assert average([1, 2]) == 1.5"),
            Case("empty", "assert average([]) == 0.0"),
            Case("single", "assert average([7]) == 7"),
            Case("negative", "assert average([-2, 2, 3]) == 1"),
            Case("halves", "assert average([1, 2, 3, 4]) == 2.5"),
            Case("empty_tuple", "assert average(()) == 0.0"),
        ],
        [
            Bug(
                "sum(numbers) / len(numbers)",
                "sum(numbers) // len(numbers)",
                "average rounds down\n\n`average([1, 2])` returns 1 but should return 1.5.",
            ),
            Bug(
                "    if not numbers:\n        return 0.0\n",
                "",
                "average crashes on an empty list\n\n`average([])` raises ZeroDivisionError but should return 0.0.",
            ),
            Bug(
                "/ len(numbers)",
                "/ (len(numbers) + 1)",
                "average divides by too much\n\n`average([2, 4, 6])` returns 3.0 but should return 4.0.",
            ),
            Bug(
                "sum(numbers) / len(numbers)",
                "max(numbers) / len(numbers)",
                "average uses the largest number\n\n`average([2, 4, 6])` returns 2.0 but should return 4.0 "
                "(the sum divided by the count).",
            ),
        ],
    ),
    _f(
        "fizzbuzz",
        "games",
        "fizzbuzz",
        '''
def fizzbuzz(n):
    """Return "FizzBuzz" for multiples of 15, "Fizz" for multiples of 3, "Buzz" for multiples of 5, else str(n)."""
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
''',
        [
            Case("fizz", 'assert fizzbuzz(9) == "Fizz"'),
            Case("buzz", 'assert fizzbuzz(10) == "Buzz"'),
            Case("fizzbuzz", 'assert fizzbuzz(30) == "FizzBuzz"'),
            Case("number", 'assert fizzbuzz(7) == "7"'),
            Case("three", 'assert fizzbuzz(3) == "Fizz"'),
            Case("five", 'assert fizzbuzz(5) == "Buzz"'),
            Case("fifteen", 'assert fizzbuzz(15) == "FizzBuzz"'),
            Case("one", 'assert fizzbuzz(1) == "1"'),
        ],
        [
            Bug(
                "    return str(n)\n",
                "    return n\n",
                'fizzbuzz returns an int\n\n`fizzbuzz(7)` returns 7 but should return the string "7".',
            ),
            Bug(
                "n % 3 == 0",
                "n % 3 == 1",
                'fizzbuzz misses Fizz\n\n`fizzbuzz(9)` returns "9" but should return "Fizz": multiples of 3 '
                'are "Fizz".',
            ),
            Bug(
                'return "Buzz"',
                'return "Fizz"',
                'fizzbuzz says Fizz for multiples of 5\n\n`fizzbuzz(10)` returns "Fizz" but should return '
                '"Buzz".',
            ),
            Bug(
                "n % 15 == 0",
                "n % 15 == 1",
                'fizzbuzz misses FizzBuzz\n\n`fizzbuzz(30)` returns "Fizz" but should return "FizzBuzz": '
                'multiples of 15 are "FizzBuzz".',
            ),
        ],
    ),
    _f(
        "count_words",
        "wordcount",
        "count_words",
        '''
def count_words(text):
    """Number of words in text (words are separated by whitespace)."""
    return len(text.split())
''',
        [
            Case("two", 'assert count_words("hello world") == 2'),
            Case("empty", 'assert count_words("") == 0'),
            Case("spaces", 'assert count_words("  a   b  c ") == 3'),
            Case("newline", 'assert count_words("one\\ntwo") == 2'),
            Case("tab", 'assert count_words("a\\tb c") == 3'),
            Case("single", 'assert count_words("word") == 1'),
            Case("only_spaces", 'assert count_words("   ") == 0'),
        ],
        [
            Bug(
                "len(text.split())",
                "len(text)",
                'count_words counts characters\n\n`count_words("hello world")` returns 11 but should return 2.',
            ),
            Bug(
                "text.split()",
                'text.split(" ")',
                'count_words counts empty words\n\n`count_words("  a   b  c ")` returns 9 but should return 3: '
                "runs of whitespace separate words.",
            ),
            Bug(
                "len(text.split())",
                "len(text.split()) + 1",
                'count_words counts one too many\n\n`count_words("hello world")` returns 3 but should return 2.',
            ),
            Bug(
                "len(text.split())",
                'text.count(" ") + 1',
                'count_words is wrong for empty text\n\n`count_words("")` returns 1 but should return 0, and '
                '`count_words("one\\ntwo")` should return 2.',
            ),
        ],
    ),
    _f(
        "index_of",
        "search",
        "index_of",
        '''
def index_of(items, target):
    """Index of the first item equal to target, or -1 if there is none."""
    for i in range(len(items)):
        if items[i] == target:
            return i
    return -1
''',
        [
            Case("found", 'assert index_of(["a", "b", "c"], "b") == 1'),
            Case("first", "assert index_of([5, 6], 5) == 0"),
            Case("missing", "assert index_of([1, 2], 9) == -1"),
            Case("repeated", "assert index_of([4, 7, 7], 7) == 1"),
            Case("last", "assert index_of([1, 2, 3], 3) == 2"),
            Case("empty", "assert index_of([], 1) == -1"),
            Case("first_string", 'assert index_of(["x", "y"], "x") == 0'),
        ],
        [
            Bug(
                "    return -1\n",
                "    return 0\n",
                "index_of returns 0 for a missing item\n\n`index_of([1, 2], 9)` returns 0 but should return -1.",
            ),
            Bug(
                "range(len(items))",
                "range(1, len(items))",
                "index_of skips the first item\n\n`index_of([5, 6], 5)` returns -1 but should return 0.",
            ),
            Bug(
                "            return i\n",
                "            return i + 1\n",
                'index_of is off by one\n\n`index_of(["a", "b", "c"], "b")` returns 2 but should return 1: '
                "indexes start at 0.",
            ),
            Bug(
                "if items[i] == target:",
                "if items[i] != target:",
                'index_of finds the wrong item\n\n`index_of(["a", "b", "c"], "b")` returns 0 but should '
                "return 1, the index of the item equal to the target.",
            ),
        ],
    ),
    _f(
        "running_total",
        "totals",
        "running_total",
        '''
def running_total(numbers):
    """The list of running sums: element i is the sum of numbers[0..i]."""
    totals = []
    total = 0
    for n in numbers:
        total += n
        totals.append(total)
    return totals
''',
        [
            Case("three", "assert running_total([1, 2, 3]) == [1, 3, 6]"),
            Case("empty", "assert running_total([]) == []"),
            Case("negative", "assert running_total([5, -2]) == [5, 3]"),
            Case("single", "assert running_total([4]) == [4]"),
            Case("zeros", "assert running_total([0, 2, 0]) == [0, 2, 2]"),
            Case("four", "assert running_total([2, 2, 2, 2]) == [2, 4, 6, 8]"),
        ],
        [
            Bug(
                "        totals.append(total)\n",
                "        totals.append(n)\n",
                "running_total does not accumulate\n\n`running_total([1, 2, 3])` returns [1, 2, 3] but should "
                "return [1, 3, 6].",
            ),
            Bug(
                "        total += n\n        totals.append(total)\n",
                "        totals.append(total)\n        total += n\n",
                "running_total lags one step\n\n`running_total([1, 2, 3])` returns [0, 1, 3] but should return "
                "[1, 3, 6]: each sum includes the current number.",
            ),
            Bug(
                "    totals = []\n",
                "    totals = [0]\n",
                "running_total starts with an extra 0\n\n`running_total([1, 2, 3])` returns [0, 1, 3, 6] but "
                "should return [1, 3, 6].",
            ),
            Bug(
                "    return totals\n",
                "    return total\n",
                "running_total returns only the last sum\n\n`running_total([1, 2, 3])` returns 6 but should return "
                "the list [1, 3, 6].",
            ),
        ],
    ),
    # --- added with the family held-out split ----------------------------------------------------------
    _f(
        "absolute",
        "magnitude",
        "absolute",
        '''
def absolute(x):
    """The distance of x from zero."""
    if x < 0:
        return -x
    return x
''',
        [
            Case("positive", "assert absolute(5) == 5"),
            Case("negative", "assert absolute(-4) == 4"),
            Case("minus_one", "assert absolute(-1) == 1"),
            Case("zero", "assert absolute(0) == 0"),
            Case("fraction", "assert absolute(-2.5) == 2.5"),
            Case("large_positive", "assert absolute(12) == 12"),
            Case("small_negative", "assert absolute(-0.25) == 0.25"),
        ],
        [
            Bug(
                "if x < 0:",
                "if x > 0:",
                "absolute makes positive numbers negative\n\n`absolute(5)` returns -5 but should return 5, and "
                "`absolute(-4)` should return 4.",
            ),
            Bug(
                "        return -x\n",
                "        return x\n",
                "absolute returns negative numbers unchanged\n\n`absolute(-4)` returns -4 but should return 4.",
            ),
            Bug(
                "    return x\n",
                "    return -x\n",
                "absolute negates positive numbers\n\n`absolute(5)` returns -5 but should return 5.",
            ),
            Bug(
                "if x < 0:",
                "if x < -1:",
                "absolute(-1) is -1\n\n`absolute(-1)` returns -1 but should return 1, and `absolute(-0.5)` "
                "should return 0.5.",
            ),
        ],
    ),
    _f(
        "sign",
        "signs",
        "sign",
        '''
def sign(x):
    """-1 for a negative number, 1 for a positive one, 0 for zero."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0
''',
        [
            Case("positive", "assert sign(7) == 1"),
            Case("negative", "assert sign(-3) == -1"),
            Case("zero", "assert sign(0) == 0"),
            Case("small", "assert sign(0.5) == 1"),
            Case("big_negative", "assert sign(-100) == -1"),
            Case("tiny_negative", "assert sign(-0.5) == -1"),
            Case("one", "assert sign(1) == 1"),
            Case("float_zero", "assert sign(0.0) == 0"),
        ],
        [
            Bug(
                "        return -1\n",
                "        return 1\n",
                "sign of a negative number is 1\n\n`sign(-3)` returns 1 but should return -1.",
            ),
            Bug(
                "    return 0\n",
                "    return 1\n",
                "sign of zero is 1\n\n`sign(0)` returns 1 but should return 0.",
            ),
            Bug(
                "if x > 0:",
                "if x > 1:",
                "sign of a small positive number is 0\n\n`sign(0.5)` returns 0 but should return 1: every number "
                "above zero has sign 1.",
            ),
            Bug(
                "if x < 0:",
                "if x <= 0:",
                "sign of zero is -1\n\n`sign(0)` returns -1 but should return 0.",
            ),
        ],
    ),
    _f(
        "square_all",
        "squares",
        "square_all",
        '''
def square_all(numbers):
    """A new list of the squares of numbers, in order."""
    return [n * n for n in numbers]
''',
        [
            Case("small", "assert square_all([1, 2, 3]) == [1, 4, 9]"),
            Case("empty", "assert square_all([]) == []"),
            Case("negative", "assert square_all([-2]) == [4]"),
            Case("zero", "assert square_all([0, 5]) == [0, 25]"),
            Case("mixed", "assert square_all([-3, 3]) == [9, 9]"),
            Case("ten", "assert square_all([10]) == [100]"),
        ],
        [
            Bug(
                "n * n",
                "n * 2",
                "square_all doubles instead of squaring\n\n`square_all([1, 2, 3])` returns [2, 4, 6] but should "
                "return [1, 4, 9].",
            ),
            Bug(
                "n * n",
                "n + n",
                "square_all adds instead of multiplying\n\n`square_all([1, 2, 3])` returns [2, 4, 6] but should "
                "return [1, 4, 9], each number times itself.",
            ),
            Bug(
                "for n in numbers]",
                "for n in numbers[1:]]",
                "square_all drops the first number\n\n`square_all([1, 2, 3])` returns [4, 9] but should return "
                "[1, 4, 9].",
            ),
            Bug(
                "for n in numbers]",
                "for n in numbers if n > 0]",
                "square_all drops zero and negative numbers\n\n`square_all([-2])` returns [] but should return "
                "[4], and `square_all([0, 5])` should return [0, 25].",
            ),
        ],
    ),
    _f(
        "gcd",
        "divisors",
        "gcd",
        '''
def gcd(a, b):
    """The greatest common divisor of two non-negative integers."""
    while b:
        a, b = b, a % b
    return a
''',
        [
            Case("common", "assert gcd(12, 18) == 6"),
            Case("coprime", "assert gcd(7, 5) == 1"),
            Case("zero_second", "assert gcd(9, 0) == 9"),
            Case("zero_first", "assert gcd(0, 4) == 4"),
            Case("equal", "assert gcd(10, 10) == 10"),
            Case("larger_first", "assert gcd(48, 36) == 12"),
            Case("coprime_larger", "assert gcd(9, 28) == 1"),
            Case("zero_first_six", "assert gcd(0, 6) == 6"),
        ],
        [
            Bug(
                "    return a\n",
                "    return b\n",
                "gcd returns 0\n\n`gcd(12, 18)` returns 0 but should return 6.",
            ),
            Bug(
                "while b:",
                "if b:",
                "gcd stops after one step\n\n`gcd(12, 18)` returns 18 but should return 6.",
            ),
            Bug(
                "while b:",
                "while b > 1:",
                "gcd of coprime numbers is wrong\n\n`gcd(7, 5)` returns 2 but should return 1.",
            ),
            Bug(
                "a, b = b, a % b",
                "a, b = b, b % a",
                "gcd swaps the remainder\n\n`gcd(7, 5)` returns 5 but should return 1, and `gcd(0, 4)` raises "
                "ZeroDivisionError instead of returning 4.",
            ),
        ],
    ),
    _f(
        "is_sorted",
        "ordering",
        "is_sorted",
        '''
def is_sorted(items):
    """True if every item is less than or equal to the next one."""
    for i in range(len(items) - 1):
        if items[i] > items[i + 1]:
            return False
    return True
''',
        [
            Case("ascending", "assert is_sorted([1, 2, 3]) is True"),
            Case("unsorted", "assert is_sorted([3, 1, 2]) is False"),
            Case("equal_neighbours", "assert is_sorted([2, 2, 5]) is True"),
            Case("empty", "assert is_sorted([]) is True"),
            Case("last_pair", "assert is_sorted([1, 2, 5, 4]) is False"),
            Case("equal_pair", "assert is_sorted([3, 3]) is True"),
            Case("last_two", "assert is_sorted([0, 9, 8]) is False"),
            Case("single", "assert is_sorted([4]) is True"),
        ],
        [
            Bug(
                "items[i] > items[i + 1]",
                "items[i] >= items[i + 1]",
                "is_sorted rejects equal neighbours\n\n`is_sorted([2, 2, 5])` returns False but should return "
                "True: equal items are in order.",
            ),
            Bug(
                "            return False\n",
                "            return True\n",
                "is_sorted accepts unsorted lists\n\n`is_sorted([3, 1, 2])` returns True but should return False.",
            ),
            Bug(
                "range(len(items) - 1)",
                "range(len(items) - 2)",
                "is_sorted ignores the last pair\n\n`is_sorted([1, 2, 5, 4])` returns True but should return "
                "False.",
            ),
            Bug(
                "    return True\n",
                "    return False\n",
                "is_sorted rejects sorted lists\n\n`is_sorted([1, 2, 3])` returns False but should return True.",
            ),
        ],
    ),
    _f(
        "power",
        "powers",
        "power",
        '''
def power(base, exponent):
    """base raised to a non-negative integer exponent."""
    result = 1
    for _ in range(exponent):
        result *= base
    return result
''',
        [
            Case("cube", "assert power(2, 3) == 8"),
            Case("exponent_zero", "assert power(5, 0) == 1"),
            Case("exponent_one", "assert power(3, 1) == 3"),
            Case("negative_base", "assert power(-2, 2) == 4"),
            Case("square", "assert power(7, 2) == 49"),
            Case("zero_base", "assert power(0, 3) == 0"),
        ],
        [
            Bug(
                "result = 1\n",
                "result = base\n",
                "power multiplies once too often\n\n`power(2, 3)` returns 16 but should return 8, and "
                "`power(5, 0)` should return 1.",
            ),
            Bug(
                "range(exponent)",
                "range(exponent - 1)",
                "power multiplies once too few\n\n`power(2, 3)` returns 4 but should return 8.",
            ),
            Bug(
                "result *= base",
                "result += base",
                "power adds instead of multiplying\n\n`power(2, 3)` returns 7 but should return 8 (2 * 2 * 2).",
            ),
            Bug(
                "    return result\n",
                "    return base\n",
                "power returns its base\n\n`power(2, 3)` returns 2 but should return 8.",
            ),
        ],
    ),
    _f(
        "safe_divide",
        "division",
        "safe_divide",
        '''
def safe_divide(a, b):
    """a / b, or None when b is zero."""
    if b == 0:
        return None
    return a / b
''',
        [
            Case("whole", "assert safe_divide(6, 3) == 2"),
            Case("fraction", "assert safe_divide(1, 4) == 0.25"),
            Case("zero_divisor", "assert safe_divide(5, 0) is None"),
            Case("negative", "assert safe_divide(-6, 2) == -3"),
            Case("zero_numerator", "assert safe_divide(0, 5) == 0"),
            Case("negative_by_zero", "assert safe_divide(-3, 0) is None"),
            Case("half", "assert safe_divide(7, 2) == 3.5"),
        ],
        [
            Bug(
                "return a / b",
                "return a // b",
                "safe_divide drops the fraction\n\n`safe_divide(1, 4)` returns 0 but should return 0.25.",
            ),
            Bug(
                "return a / b",
                "return b / a",
                "safe_divide divides the wrong way round\n\n`safe_divide(6, 3)` returns 0.5 but should return 2.",
            ),
            Bug(
                "if b == 0:",
                "if a == 0:",
                "safe_divide raises on a zero divisor\n\n`safe_divide(5, 0)` raises ZeroDivisionError but should "
                "return None.",
            ),
            Bug(
                "return None",
                "return 0",
                "safe_divide returns 0 for a zero divisor\n\n`safe_divide(5, 0)` returns 0 but should return None.",
            ),
        ],
    ),
    _f(
        "truncate",
        "text_limits",
        "truncate",
        '''
def truncate(text, limit):
    """text cut to at most limit characters, with "..." appended when it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + "..."
''',
        [
            Case("short", 'assert truncate("hi", 5) == "hi"'),
            Case("exact", 'assert truncate("hello", 5) == "hello"'),
            Case("long", 'assert truncate("hello world", 5) == "hello..."'),
            Case("empty", 'assert truncate("", 3) == ""'),
            Case("three", 'assert truncate("abcdef", 3) == "abc..."'),
            Case("one_over", 'assert truncate("abcd", 3) == "abc..."'),
            Case("fits_two", 'assert truncate("ab", 2) == "ab"'),
        ],
        [
            Bug(
                "len(text) <= limit",
                "len(text) < limit",
                'truncate cuts text that fits exactly\n\n`truncate("hello", 5)` returns "hello..." but should '
                'return "hello".',
            ),
            Bug(
                "text[:limit]",
                "text[:limit - 1]",
                'truncate keeps one character too few\n\n`truncate("hello world", 5)` returns "hell..." but should '
                'return "hello...".',
            ),
            Bug(
                ' + "..."',
                "",
                'truncate does not mark cut text\n\n`truncate("hello world", 5)` returns "hello" but should return '
                '"hello...".',
            ),
            Bug(
                "        return text\n",
                '        return ""\n',
                'truncate loses short text\n\n`truncate("hi", 5)` returns "" but should return "hi".',
            ),
        ],
    ),
    _f(
        "is_prime",
        "primes",
        "is_prime",
        '''
def is_prime(n):
    """True if n is a prime number."""
    if n < 2:
        return False
    for d in range(2, n):
        if n % d == 0:
            return False
    return True
''',
        [
            Case("two", "assert is_prime(2) is True"),
            Case("seven", "assert is_prime(7) is True"),
            Case("nine", "assert is_prime(9) is False"),
            Case("four", "assert is_prime(4) is False"),
            Case("one", "assert is_prime(1) is False"),
            Case("negative", "assert is_prime(-7) is False"),
            Case("zero", "assert is_prime(0) is False"),
            Case("eight", "assert is_prime(8) is False"),
            Case("thirteen", "assert is_prime(13) is True"),
        ],
        [
            Bug(
                "if n < 2:",
                "if n == 0:",
                "is_prime says 1 is prime\n\n`is_prime(1)` returns True but should return False.",
            ),
            Bug(
                "range(2, n)",
                "range(3, n, 2)",
                "is_prime misses even numbers\n\n`is_prime(4)` returns True but should return False.",
            ),
            Bug(
                "    return True\n",
                "    return False\n",
                "is_prime finds no primes\n\n`is_prime(7)` returns False but should return True.",
            ),
            Bug(
                "if n % d == 0:",
                "if n % d == 1:",
                "is_prime rejects primes\n\n`is_prime(7)` returns False but should return True, and `is_prime(9)` "
                "should return False.",
            ),
        ],
    ),
    _f(
        "percentage",
        "ratios",
        "percentage",
        '''
def percentage(part, whole):
    """part as a percentage of whole, rounded to one decimal."""
    return round(part / whole * 100, 1)
''',
        [
            Case("half", "assert percentage(1, 2) == 50.0"),
            Case("third", "assert percentage(1, 3) == 33.3"),
            Case("all", "assert percentage(4, 4) == 100.0"),
            Case("none", "assert percentage(0, 5) == 0.0"),
            Case("quarter", "assert percentage(1, 4) == 25.0"),
            Case("two_thirds", "assert percentage(2, 3) == 66.7"),
        ],
        [
            Bug(
                "* 100",
                "* 10",
                "percentage is ten times too small\n\n`percentage(1, 2)` returns 5.0 but should return 50.0.",
            ),
            Bug(
                "part / whole",
                "whole / part",
                "percentage divides the wrong way round\n\n`percentage(1, 2)` returns 200.0 but should return 50.0.",
            ),
            Bug(
                "100, 1)",
                "100, 0)",
                "percentage rounds to whole numbers\n\n`percentage(1, 3)` returns 33.0 but should return 33.3.",
            ),
            Bug(
                "round(part / whole * 100, 1)",
                "round(part / whole, 1) * 100",
                "percentage rounds too early\n\n`percentage(1, 3)` returns 30.0 but should return 33.3.",
            ),
        ],
    ),
    _f(
        "min_value",
        "minimums",
        "min_value",
        '''
def min_value(numbers):
    """The smallest number of the list, or None for an empty list."""
    if not numbers:
        return None
    best = numbers[0]
    for n in numbers[1:]:
        if n < best:
            best = n
    return best
''',
        [
            Case("unsorted", "assert min_value([3, 1, 2]) == 1"),
            Case("negatives", "assert min_value([-5, -2, -9]) == -9"),
            Case("empty", "assert min_value([]) is None"),
            Case("empty_tuple", "assert min_value(()) is None"),
            Case("single", "assert min_value([7]) == 7"),
            Case("last_smallest", "assert min_value([4, 6, 0]) == 0"),
            Case("positives", "assert min_value([5, 8, 9]) == 5"),
            Case("duplicates", "assert min_value([2, 2, 3]) == 2"),
        ],
        [
            Bug(
                "if n < best:",
                "if n > best:",
                "min_value returns the largest number\n\n`min_value([3, 1, 2])` returns 3 but should return 1.",
            ),
            Bug(
                "best = numbers[0]",
                "best = 0",
                "min_value is wrong for positive numbers\n\n`min_value([5, 8, 9])` returns 0 but should return 5.",
            ),
            Bug(
                "for n in numbers[1:]:",
                "for n in numbers[1:-1]:",
                "min_value ignores the last number\n\n`min_value([4, 6, 0])` returns 4 but should return 0.",
            ),
            Bug(
                "    if not numbers:\n        return None\n",
                "",
                "min_value crashes on an empty list\n\n`min_value([])` raises IndexError but should return None.",
            ),
        ],
    ),
    _f(
        "count_char",
        "tallies",
        "count_char",
        '''
def count_char(text, char):
    """How many times char occurs in text, ignoring case."""
    return text.lower().count(char.lower())
''',
        [
            Case("banana", 'assert count_char("banana", "a") == 3'),
            Case("mississippi", 'assert count_char("Mississippi", "s") == 4'),
            Case("capital_text", 'assert count_char("Apple", "a") == 1'),
            Case("shouting", 'assert count_char("APPLE", "p") == 2'),
            Case("capital_char", 'assert count_char("Hello", "L") == 2'),
            Case("both_cases", 'assert count_char("aAaA", "A") == 4'),
            Case("empty", 'assert count_char("", "x") == 0'),
            Case("absent", 'assert count_char("hello", "z") == 0'),
        ],
        [
            Bug(
                "text.lower().count(char.lower())",
                "text.count(char)",
                'count_char is case sensitive\n\n`count_char("Apple", "a")` returns 0 but should return 1: case '
                "is ignored.",
            ),
            Bug(
                "count(char.lower())",
                "count(char)",
                'count_char misses an upper-case character\n\n`count_char("aAaA", "A")` returns 0 but should '
                "return 4: case is ignored.",
            ),
            Bug(
                ".count(char.lower())",
                ".find(char.lower())",
                'count_char returns a position\n\n`count_char("banana", "a")` returns 1 but should return 3, the '
                "number of times the character occurs.",
            ),
            Bug(
                "text.lower()",
                "text[1:].lower()",
                'count_char skips the first letter\n\n`count_char("Apple", "a")` returns 0 but should return 1.',
            ),
        ],
    ),
    _f(
        "remove_duplicates",
        "dedupe",
        "remove_duplicates",
        '''
def remove_duplicates(items):
    """The items without repeats, in the order of their first occurrence."""
    seen = set()
    result = []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.append(item)
    return result
''',
        [
            Case("repeat", "assert remove_duplicates([1, 2, 1, 3]) == [1, 2, 3]"),
            Case("empty", "assert remove_duplicates([]) == []"),
            Case("strings", 'assert remove_duplicates(["b", "a", "b"]) == ["b", "a"]'),
            Case("all_same", "assert remove_duplicates([5, 5, 5]) == [5]"),
            Case("no_repeats", "assert remove_duplicates([3, 1, 2]) == [3, 1, 2]"),
            Case("mirror", "assert remove_duplicates([1, 2, 3, 2, 1]) == [1, 2, 3]"),
        ],
        [
            Bug(
                "            seen.add(item)\n",
                "",
                "remove_duplicates keeps repeats\n\n`remove_duplicates([1, 2, 1, 3])` returns [1, 2, 1, 3] but should "
                "return [1, 2, 3].",
            ),
            Bug(
                "if item not in seen:",
                "if item in seen:",
                "remove_duplicates loses everything\n\n`remove_duplicates([3, 1, 2])` returns [] but should return "
                "[3, 1, 2].",
            ),
            Bug(
                "    return result\n",
                "    return sorted(seen)\n",
                "remove_duplicates sorts the items\n\n`remove_duplicates([3, 1, 2])` returns [1, 2, 3] but should "
                "return [3, 1, 2]: the order of first occurrence is kept.",
            ),
            Bug(
                "            result.append(item)\n",
                "            result.insert(0, item)\n",
                "remove_duplicates reverses the order\n\n`remove_duplicates([1, 2, 1, 3])` returns [3, 2, 1] but "
                "should return [1, 2, 3].",
            ),
        ],
    ),
    _f(
        "flatten_once",
        "nesting",
        "flatten_once",
        '''
def flatten_once(lists):
    """The items of the inner lists, in order, in one list (one level deep)."""
    result = []
    for inner in lists:
        result.extend(inner)
    return result
''',
        [
            Case("two", "assert flatten_once([[1, 2], [3]]) == [1, 2, 3]"),
            Case("empty", "assert flatten_once([]) == []"),
            Case("empty_inner", "assert flatten_once([[], [4]]) == [4]"),
            Case("one_level", "assert flatten_once([[1, [2]], [3]]) == [1, [2], 3]"),
            Case("strings", 'assert flatten_once([["a"], ["b", "c"]]) == ["a", "b", "c"]'),
            Case("three", "assert flatten_once([[5], [], [6, 7]]) == [5, 6, 7]"),
        ],
        [
            Bug(
                "result.extend(inner)",
                "result.append(inner)",
                "flatten_once does not flatten\n\n`flatten_once([[1, 2], [3]])` returns [[1, 2], [3]] but should "
                "return [1, 2, 3].",
            ),
            Bug(
                "for inner in lists:",
                "for inner in lists[1:]:",
                "flatten_once drops the first list\n\n`flatten_once([[1, 2], [3]])` returns [3] but should return "
                "[1, 2, 3].",
            ),
            Bug(
                "result.extend(inner)",
                "result.extend(inner[:1])",
                'flatten_once keeps one item per list\n\n`flatten_once([["a"], ["b", "c"]])` returns ["a", "b"] but '
                'should return ["a", "b", "c"].',
            ),
            Bug(
                "result.extend(inner)",
                "result.extend(reversed(inner))",
                "flatten_once reverses each list\n\n`flatten_once([[1, 2], [3]])` returns [2, 1, 3] but should "
                "return [1, 2, 3].",
            ),
        ],
    ),
    _f(
        "chunk_list",
        "chunks",
        "chunk_list",
        '''
def chunk_list(items, size):
    """items split into consecutive lists of size items; the last one may be shorter."""
    return [items[i:i + size] for i in range(0, len(items), size)]
''',
        [
            Case("uneven", "assert chunk_list([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]"),
            Case("even", "assert chunk_list([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]"),
            Case("empty", "assert chunk_list([], 3) == []"),
            Case("size_too_big", "assert chunk_list([1, 2], 5) == [[1, 2]]"),
            Case("size_one", "assert chunk_list([1, 2, 3], 1) == [[1], [2], [3]]"),
            Case("threes", "assert chunk_list([7, 8, 9, 10, 11, 12], 3) == [[7, 8, 9], [10, 11, 12]]"),
        ],
        [
            Bug(
                "range(0, len(items), size)",
                "range(0, len(items) - size, size)",
                "chunk_list drops the last chunk\n\n`chunk_list([1, 2, 3, 4, 5], 2)` returns [[1, 2], [3, 4]] but "
                "should return [[1, 2], [3, 4], [5]].",
            ),
            Bug(
                "items[i:i + size]",
                "items[i:i + size - 1]",
                "chunk_list makes chunks one item short\n\n`chunk_list([1, 2, 3, 4, 5], 2)` returns [[1], [3], [5]] "
                "but should return [[1, 2], [3, 4], [5]].",
            ),
            Bug(
                "range(0, len(items), size)",
                "range(0, len(items))",
                "chunk_list makes overlapping chunks\n\n`chunk_list([1, 2, 3, 4], 2)` returns [[1, 2], [2, 3], "
                "[3, 4], [4]] but should return [[1, 2], [3, 4]].",
            ),
            Bug(
                "range(0, len(items), size)",
                "range(1, len(items), size)",
                "chunk_list loses the first item\n\n`chunk_list([1, 2, 3, 4], 2)` returns [[2, 3], [4]] but should "
                "return [[1, 2], [3, 4]].",
            ),
        ],
    ),
    _f(
        "median",
        "middles",
        "median",
        '''
def median(numbers):
    """The middle value of the numbers (the mean of the two middle ones for an even count)."""
    ordered = sorted(numbers)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
''',
        [
            Case("odd", "assert median([3, 1, 2]) == 2"),
            Case("even", "assert median([4, 1, 3, 2]) == 2.5"),
            Case("single", "assert median([5]) == 5"),
            Case("pair", "assert median([10, 20]) == 15"),
            Case("five", "assert median([7, 1, 9, 3, 5]) == 5"),
            Case("negatives", "assert median([-1, -3, -2]) == -2"),
            Case("even_repeats", "assert median([1, 1, 2, 2]) == 1.5"),
        ],
        [
            Bug(
                "ordered = sorted(numbers)",
                "ordered = numbers",
                "median ignores order\n\n`median([3, 1, 2])` returns 1 but should return 2: the middle of the "
                "sorted numbers.",
            ),
            Bug(
                "return (ordered[middle - 1] + ordered[middle]) / 2",
                "return ordered[middle]",
                "median is wrong for an even count\n\n`median([4, 1, 3, 2])` returns 3 but should return 2.5, the "
                "mean of the two middle numbers.",
            ),
            Bug(
                ") / 2",
                ") // 2",
                "median rounds down\n\n`median([4, 1, 3, 2])` returns 2 but should return 2.5.",
            ),
            Bug(
                "if len(ordered) % 2 == 1:",
                "if len(ordered) % 2 == 0:",
                "median mixes up odd and even counts\n\n`median([3, 1, 2])` returns 1.5 but should return 2.",
            ),
        ],
    ),
    _f(
        "fibonacci",
        "sequences",
        "fibonacci",
        '''
def fibonacci(n):
    """The n-th Fibonacci number, counting from fibonacci(0) == 0 and fibonacci(1) == 1."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
''',
        [
            Case("zero", "assert fibonacci(0) == 0"),
            Case("one", "assert fibonacci(1) == 1"),
            Case("two", "assert fibonacci(2) == 1"),
            Case("three", "assert fibonacci(3) == 2"),
            Case("seven", "assert fibonacci(7) == 13"),
            Case("ten", "assert fibonacci(10) == 55"),
        ],
        [
            Bug(
                "a, b = 0, 1",
                "a, b = 1, 1",
                "fibonacci starts at 1\n\n`fibonacci(0)` returns 1 but should return 0.",
            ),
            Bug(
                "range(n)",
                "range(n - 1)",
                "fibonacci is one step behind\n\n`fibonacci(10)` returns 34 but should return 55.",
            ),
            Bug(
                "    return a\n",
                "    return b\n",
                "fibonacci is one step ahead\n\n`fibonacci(10)` returns 89 but should return 55.",
            ),
            Bug(
                "a, b = b, a + b",
                "a, b = b, a + 1",
                "fibonacci grows too slowly\n\n`fibonacci(10)` returns 5 but should return 55: each number is the "
                "sum of the two before it.",
            ),
        ],
    ),
    _f(
        "is_anagram",
        "anagrams",
        "is_anagram",
        '''
def is_anagram(first, second):
    """True if the two words use the same letters the same number of times, ignoring case."""
    return sorted(first.lower()) == sorted(second.lower())
''',
        [
            Case("listen", 'assert is_anagram("listen", "silent") is True'),
            Case("mixed_case", 'assert is_anagram("Dusty", "study") is True'),
            Case("capitals", 'assert is_anagram("Night", "Thing") is True'),
            Case("missing_letter", 'assert is_anagram("apple", "pale") is False'),
            Case("counts_differ", 'assert is_anagram("aab", "abb") is False'),
            Case("empty", 'assert is_anagram("", "") is True'),
            Case("other_letter", 'assert is_anagram("abc", "abd") is False'),
        ],
        [
            Bug(
                "sorted(first.lower()) == sorted(second.lower())",
                "set(first.lower()) == set(second.lower())",
                'is_anagram ignores how often letters occur\n\n`is_anagram("aab", "abb")` returns True but should '
                "return False.",
            ),
            Bug(
                "sorted(first.lower())",
                "sorted(first)",
                'is_anagram is case sensitive\n\n`is_anagram("Dusty", "study")` returns False but should return '
                "True: case is ignored.",
            ),
            Bug(
                "sorted(first.lower()) == sorted(second.lower())",
                "first.lower() == second.lower()[::-1]",
                'is_anagram only accepts reversed words\n\n`is_anagram("listen", "silent")` returns False but '
                "should return True: any order of the same letters is an anagram.",
            ),
            Bug(
                ") == sorted(",
                ") != sorted(",
                'is_anagram answers the opposite\n\n`is_anagram("listen", "silent")` returns False but should '
                "return True.",
            ),
        ],
    ),
    _f(
        "lcm",
        "multiples",
        "lcm",
        '''
def lcm(a, b):
    """Least common multiple of two positive integers."""
    larger = max(a, b)
    candidate = larger
    while candidate % a != 0 or candidate % b != 0:
        candidate += larger
    return candidate
''',
        [
            Case("small", "assert lcm(4, 6) == 12"),
            Case("coprime", "assert lcm(3, 5) == 15"),
            Case("equal", "assert lcm(7, 7) == 7"),
            Case("one", "assert lcm(1, 9) == 9"),
            Case("shared_factor", "assert lcm(8, 12) == 24"),
            Case("multiple", "assert lcm(6, 3) == 6"),
            Case("first_larger", "assert lcm(9, 6) == 18"),
            Case("first_larger_even", "assert lcm(10, 4) == 20"),
        ],
        [
            Bug(
                "or candidate % b != 0",
                "and candidate % b != 0",
                "lcm stops at a multiple of only one number\n\n`lcm(4, 6)` returns 6 but should return 12.",
            ),
            Bug(
                "    candidate = larger\n",
                "    candidate = 0\n",
                "lcm returns 0\n\n`lcm(3, 5)` returns 0 but should return 15.",
            ),
            Bug(
                "    return candidate\n",
                "    return a * b\n",
                "lcm returns the product\n\n`lcm(4, 6)` returns 24 but should return 12: the least common "
                "multiple, not the product.",
            ),
            Bug(
                "while candidate % a != 0 or candidate % b != 0:",
                "while candidate % a != 0:",
                "lcm is wrong when the first number is larger\n\n`lcm(9, 6)` returns 9 but should return 18.",
            ),
        ],
    ),
    _f(
        "to_celsius",
        "thermometer",
        "to_celsius",
        '''
def to_celsius(fahrenheit):
    """Degrees Fahrenheit in degrees Celsius."""
    return (fahrenheit - 32) * 5 / 9
''',
        [
            Case("freezing", "assert to_celsius(32) == 0"),
            Case("boiling", "assert to_celsius(212) == 100"),
            Case("minus_forty", "assert to_celsius(-40) == -40"),
            Case("fifty", "assert to_celsius(50) == 10"),
            Case("body", "assert to_celsius(98.6) == pytest.approx(37)"),
            Case("fourteen", "assert to_celsius(14) == -10"),
        ],
        [
            Bug(
                "(fahrenheit - 32) * 5 / 9",
                "fahrenheit - 32 * 5 / 9",
                "to_celsius scales before subtracting\n\n`to_celsius(212)` returns about 194.2 but should return "
                "100: subtract 32, then multiply by 5/9.",
            ),
            Bug(
                "* 5 / 9",
                "* 9 / 5",
                "to_celsius uses the inverse ratio\n\n`to_celsius(212)` returns 324.0 but should return 100: "
                "multiply by 5/9.",
            ),
            Bug(
                "(fahrenheit - 32)",
                "(fahrenheit + 32)",
                "to_celsius adds the offset\n\n`to_celsius(32)` returns about 35.6 but should return 0.",
            ),
            Bug(
                "- 32)",
                "- 23)",
                "to_celsius uses the wrong offset\n\n`to_celsius(32)` returns 5.0 but should return 0.",
            ),
        ],
    ),
    _f(
        "rotate_left",
        "rotation",
        "rotate_left",
        '''
def rotate_left(items, steps):
    """items rotated left by steps positions (steps may exceed the length)."""
    if not items:
        return []
    steps = steps % len(items)
    return items[steps:] + items[:steps]
''',
        [
            Case("one_step", "assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]"),
            Case("no_steps", "assert rotate_left([1, 2, 3], 0) == [1, 2, 3]"),
            Case("full_turn", "assert rotate_left([1, 2, 3], 3) == [1, 2, 3]"),
            Case("more_than_length", "assert rotate_left([1, 2, 3], 4) == [2, 3, 1]"),
            Case("empty", "assert rotate_left([], 2) == []"),
            Case("empty_no_steps", "assert rotate_left([], 0) == []"),
            Case("strings", 'assert rotate_left(["a", "b", "c"], 2) == ["c", "a", "b"]'),
            Case("pair_many_steps", "assert rotate_left([5, 6], 5) == [6, 5]"),
        ],
        [
            Bug(
                "    steps = steps % len(items)\n",
                "",
                "rotate_left breaks for many steps\n\n`rotate_left([1, 2, 3], 4)` returns [1, 2, 3] but should "
                "return [2, 3, 1]: rotating by the length changes nothing, so only the remainder counts.",
            ),
            Bug(
                "items[steps:] + items[:steps]",
                "items[-steps:] + items[:-steps]",
                "rotate_left rotates right\n\n`rotate_left([1, 2, 3, 4], 1)` returns [4, 1, 2, 3] but should "
                "return [2, 3, 4, 1].",
            ),
            Bug(
                "    if not items:\n        return []\n",
                "",
                "rotate_left crashes on an empty list\n\n`rotate_left([], 2)` raises ZeroDivisionError but should "
                "return [].",
            ),
            Bug(
                "items[steps:] + items[:steps]",
                "items[steps:] + items[:steps - 1]",
                "rotate_left loses an item\n\n`rotate_left([1, 2, 3, 4], 1)` returns [2, 3, 4] but should return "
                "[2, 3, 4, 1].",
            ),
        ],
    ),
    _f(
        "last_index_of",
        "backsearch",
        "last_index_of",
        '''
def last_index_of(items, target):
    """Index of the last item equal to target, or -1 if there is none."""
    for i in range(len(items) - 1, -1, -1):
        if items[i] == target:
            return i
    return -1
''',
        [
            Case("repeated", "assert last_index_of([4, 7, 7], 7) == 2"),
            Case("missing", "assert last_index_of([1, 2], 9) == -1"),
            Case("first", "assert last_index_of([5, 6], 5) == 0"),
            Case("empty", "assert last_index_of([], 3) == -1"),
            Case("strings", 'assert last_index_of(["a", "b", "a"], "a") == 2'),
            Case("alternating", "assert last_index_of([3, 1, 3, 1], 1) == 3"),
            Case("single", "assert last_index_of([8], 8) == 0"),
        ],
        [
            Bug(
                "range(len(items) - 1, -1, -1)",
                "range(len(items) - 1, 0, -1)",
                "last_index_of misses the first item\n\n`last_index_of([5, 6], 5)` returns -1 but should return 0.",
            ),
            Bug(
                "range(len(items) - 1, -1, -1)",
                "range(len(items))",
                "last_index_of finds the first match\n\n`last_index_of([4, 7, 7], 7)` returns 1 but should return "
                "2, the index of the last match.",
            ),
            Bug(
                "range(len(items) - 1, -1, -1)",
                "range(len(items) - 2, -1, -1)",
                "last_index_of ignores the last item\n\n`last_index_of([4, 7, 7], 7)` returns 1 but should return 2.",
            ),
            Bug(
                "    return -1\n",
                "    return len(items)\n",
                "last_index_of returns the length for a missing item\n\n`last_index_of([1, 2], 9)` returns 2 but "
                "should return -1.",
            ),
        ],
    ),
    _f(
        "product",
        "products",
        "product",
        '''
def product(numbers):
    """The product of the numbers (1 for an empty list)."""
    result = 1
    for n in numbers:
        result *= n
    return result
''',
        [
            Case("three", "assert product([2, 3, 4]) == 24"),
            Case("empty", "assert product([]) == 1"),
            Case("single", "assert product([5]) == 5"),
            Case("negative", "assert product([-2, 3]) == -6"),
            Case("odd_negatives", "assert product([-1, -1, -1]) == -1"),
            Case("zero", "assert product([1, 0, 7]) == 0"),
            Case("fraction", "assert product([1.5, 2]) == 3.0"),
        ],
        [
            Bug(
                "result = 1\n",
                "result = 0\n",
                "product is always 0\n\n`product([2, 3, 4])` returns 0 but should return 24.",
            ),
            Bug(
                "result *= n",
                "result += n",
                "product adds\n\n`product([2, 3, 4])` returns 10 but should return 24.",
            ),
            Bug(
                "for n in numbers:",
                "for n in numbers[:-1]:",
                "product drops the last number\n\n`product([2, 3, 4])` returns 6 but should return 24.",
            ),
            Bug(
                "    return result\n",
                "    return abs(result)\n",
                "product loses the sign\n\n`product([-2, 3])` returns 6 but should return -6.",
            ),
        ],
    ),
    _f(
        "count_positive",
        "positives",
        "count_positive",
        '''
def count_positive(numbers):
    """How many numbers are greater than zero."""
    count = 0
    for n in numbers:
        if n > 0:
            count += 1
    return count
''',
        [
            Case("mixed", "assert count_positive([1, -2, 3]) == 2"),
            Case("empty", "assert count_positive([]) == 0"),
            Case("zeros", "assert count_positive([0, 0]) == 0"),
            Case("zero_and_one", "assert count_positive([0, 1]) == 1"),
            Case("negatives", "assert count_positive([-1, -5]) == 0"),
            Case("all_positive", "assert count_positive([4, 5, 6]) == 3"),
            Case("fractions", "assert count_positive([0.5, -0.5]) == 1"),
        ],
        [
            Bug(
                "if n > 0:",
                "if n >= 0:",
                "count_positive counts zero\n\n`count_positive([0, 0])` returns 2 but should return 0: zero is not "
                "positive.",
            ),
            Bug(
                "if n > 0:",
                "if n > 1:",
                "count_positive misses small numbers\n\n`count_positive([0.5, -0.5])` returns 0 but should return 1.",
            ),
            Bug(
                "count += 1",
                "count += n",
                "count_positive adds the numbers\n\n`count_positive([4, 5, 6])` returns 15 but should return 3.",
            ),
            Bug(
                "if n > 0:",
                "if n < 0:",
                "count_positive counts negative numbers\n\n`count_positive([-1, -5])` returns 2 but should return 0.",
            ),
        ],
    ),
    _f(
        "second_largest",
        "runnersup",
        "second_largest",
        '''
def second_largest(numbers):
    """The second largest distinct number, or None if there are fewer than two distinct numbers."""
    distinct = sorted(set(numbers))
    if len(distinct) < 2:
        return None
    return distinct[-2]
''',
        [
            Case("unsorted", "assert second_largest([3, 9, 2]) == 3"),
            Case("repeated_max", "assert second_largest([5, 5, 4]) == 4"),
            Case("pairs", "assert second_largest([10, 10, 9, 9]) == 9"),
            Case("one_distinct", "assert second_largest([7, 7]) is None"),
            Case("single", "assert second_largest([4]) is None"),
            Case("empty", "assert second_largest([]) is None"),
            Case("negatives", "assert second_largest([-1, -3, -2]) == -2"),
            Case("four", "assert second_largest([1, 2, 3, 4]) == 3"),
            Case("five", "assert second_largest([8, 6, 4, 2, 0]) == 6"),
        ],
        [
            Bug(
                "sorted(set(numbers))",
                "sorted(numbers)",
                "second_largest counts a repeated maximum twice\n\n`second_largest([5, 5, 4])` returns 5 but should "
                "return 4: the second largest distinct number.",
            ),
            Bug(
                "return distinct[-2]",
                "return distinct[1]",
                "second_largest returns the second smallest\n\n`second_largest([1, 2, 3, 4])` returns 2 but should "
                "return 3.",
            ),
            Bug(
                "if len(distinct) < 2:",
                "if len(distinct) < 1:",
                "second_largest crashes with one distinct number\n\n`second_largest([7, 7])` raises IndexError but "
                "should return None.",
            ),
            Bug(
                "return distinct[-2]",
                "return distinct[-1]",
                "second_largest returns the largest\n\n`second_largest([3, 9, 2])` returns 9 but should return 3.",
            ),
        ],
    ),
    _f(
        "pad_left",
        "padding",
        "pad_left",
        '''
def pad_left(text, width, fill=" "):
    """text preceded by enough fill characters to be width long; longer text is returned unchanged."""
    if len(text) >= width:
        return text
    return fill * (width - len(text)) + text
''',
        [
            Case("zeros", 'assert pad_left("7", 3, "0") == "007"'),
            Case("spaces", 'assert pad_left("abc", 5) == "  abc"'),
            Case("longer", 'assert pad_left("hello", 3) == "hello"'),
            Case("longer_fill", 'assert pad_left("abcdef", 4, "-") == "abcdef"'),
            Case("exact", 'assert pad_left("abc", 3) == "abc"'),
            Case("empty", 'assert pad_left("", 2, "*") == "**"'),
            Case("number", 'assert pad_left("42", 5, "0") == "00042"'),
        ],
        [
            Bug(
                "fill * (width - len(text)) + text",
                "text + fill * (width - len(text))",
                'pad_left pads on the right\n\n`pad_left("7", 3, "0")` returns "700" but should return "007".',
            ),
            Bug(
                "(width - len(text))",
                "(width - len(text) - 1)",
                'pad_left pads one character short\n\n`pad_left("7", 3, "0")` returns "07" but should return "007".',
            ),
            Bug(
                "return fill * (",
                'return " " * (',
                'pad_left ignores the fill character\n\n`pad_left("7", 3, "0")` returns "  7" but should return '
                '"007".',
            ),
            Bug(
                "        return text\n",
                "        return text[:width]\n",
                'pad_left cuts long text\n\n`pad_left("hello", 3)` returns "hel" but should return "hello": longer '
                "text is returned unchanged.",
            ),
        ],
    ),
    _f(
        "initials",
        "names",
        "initials",
        '''
def initials(name):
    """The upper-case first letter of every word of name, each followed by a dot."""
    return "".join(word[0].upper() + "." for word in name.split())
''',
        [
            Case("two_words", 'assert initials("ada lovelace") == "A.L."'),
            Case("three_words", 'assert initials("Grace Brewster Hopper") == "G.B.H."'),
            Case("one_word", 'assert initials("plato") == "P."'),
            Case("empty", 'assert initials("") == ""'),
            Case("extra_spaces", 'assert initials("  alan   turing ") == "A.T."'),
            Case("leading_space", 'assert initials(" ada") == "A."'),
            Case("letters", 'assert initials("x y") == "X.Y."'),
        ],
        [
            Bug(
                "word[0].upper()",
                "word[0]",
                'initials keeps lower case\n\n`initials("ada lovelace")` returns "a.l." but should return "A.L.".',
            ),
            Bug(
                "name.split()",
                'name.split(" ")',
                'initials crashes on extra spaces\n\n`initials("  alan   turing ")` raises IndexError but should '
                'return "A.T.".',
            ),
            Bug(
                ' + "."',
                "",
                'initials leaves out the dots\n\n`initials("ada lovelace")` returns "AL" but should return "A.L.".',
            ),
            Bug(
                '"".join(',
                '" ".join(',
                'initials puts spaces between the letters\n\n`initials("Grace Brewster Hopper")` returns "G. B. H." '
                'but should return "G.B.H.".',
            ),
        ],
    ),
    _f(
        "mode",
        "frequency",
        "mode",
        '''
def mode(items):
    """The most common item; on a tie the one that appears first. None for an empty list."""
    if not items:
        return None
    best = items[0]
    for item in items:
        if items.count(item) > items.count(best):
            best = item
    return best
''',
        [
            Case("one_winner", "assert mode([1, 2, 2, 3]) == 2"),
            Case("tie_strings", 'assert mode(["a", "b", "b", "a"]) == "a"'),
            Case("tie_pair", "assert mode([1, 2]) == 1"),
            Case("all_different", "assert mode([4, 5, 6]) == 4"),
            Case("empty", "assert mode([]) is None"),
            Case("empty_tuple", "assert mode(()) is None"),
            Case("single", "assert mode([7]) == 7"),
            Case("threes", "assert mode([3, 1, 1, 3, 3]) == 3"),
            Case("smaller_wins", "assert mode([9, 8, 8]) == 8"),
        ],
        [
            Bug(
                "items.count(item) > items.count(best)",
                "items.count(item) >= items.count(best)",
                "mode does not prefer the first of tied items\n\n`mode([4, 5, 6])` returns 6 but should return 4: "
                "on a tie the item that appears first wins.",
            ),
            Bug(
                "if items.count(item) > items.count(best):",
                "if item > best:",
                "mode returns the largest item\n\n`mode([9, 8, 8])` returns 9 but should return 8, the most common "
                "item.",
            ),
            Bug(
                "    if not items:\n        return None\n",
                "",
                "mode crashes on an empty list\n\n`mode([])` raises IndexError but should return None.",
            ),
            Bug(
                "    return best\n",
                "    return items.count(best)\n",
                "mode returns how often the item occurs\n\n`mode([9, 8, 8])` returns 2 but should return 8, the "
                "most common item.",
            ),
        ],
    ),
    _f(
        "repeat_string",
        "repeats",
        "repeat_string",
        '''
def repeat_string(text, times, separator=""):
    """text repeated times times, with separator between the copies; "" when times is 0 or less."""
    if times <= 0:
        return ""
    return separator.join([text] * times)
''',
        [
            Case("three", 'assert repeat_string("ab", 3) == "ababab"'),
            Case("once", 'assert repeat_string("x", 1) == "x"'),
            Case("zero", 'assert repeat_string("x", 0) == ""'),
            Case("negative", 'assert repeat_string("a", -2) == ""'),
            Case("separator", 'assert repeat_string("hi", 2, "-") == "hi-hi"'),
            Case("long_separator", 'assert repeat_string("ok", 3, ", ") == "ok, ok, ok"'),
        ],
        [
            Bug(
                "[text] * times",
                "[text] * (times - 1)",
                'repeat_string repeats once too few\n\n`repeat_string("ab", 3)` returns "abab" but should return '
                '"ababab".',
            ),
            Bug(
                "separator.join([text] * times)",
                "(text + separator) * times",
                'repeat_string adds a trailing separator\n\n`repeat_string("hi", 2, "-")` returns "hi-hi-" but '
                'should return "hi-hi".',
            ),
            Bug(
                '        return ""\n',
                "        return text\n",
                'repeat_string returns the text for zero copies\n\n`repeat_string("x", 0)` returns "x" but should '
                'return "".',
            ),
            Bug(
                "separator.join(",
                '" ".join(',
                'repeat_string ignores the separator\n\n`repeat_string("hi", 2, "-")` returns "hi hi" but should '
                'return "hi-hi".',
            ),
        ],
    ),
    _f(
        "is_subsequence",
        "subsequences",
        "is_subsequence",
        '''
def is_subsequence(small, big):
    """True if the characters of small appear in big in the same order (not necessarily adjacent)."""
    position = 0
    for ch in big:
        if position < len(small) and ch == small[position]:
            position += 1
    return position == len(small)
''',
        [
            Case("spread", 'assert is_subsequence("ace", "abcde") is True'),
            Case("wrong_order", 'assert is_subsequence("aec", "abcde") is False'),
            Case("empty_small", 'assert is_subsequence("", "abc") is True'),
            Case("empty_big", 'assert is_subsequence("abc", "") is False'),
            Case("equal", 'assert is_subsequence("abc", "abc") is True'),
            Case("repeat_missing", 'assert is_subsequence("aa", "ab") is False'),
            Case("gaps", 'assert is_subsequence("ab", "xaxb") is True'),
            Case("absent", 'assert is_subsequence("b", "a") is False'),
        ],
        [
            Bug(
                "    return position == len(small)\n",
                "    return position > 0\n",
                'is_subsequence accepts a partial match\n\n`is_subsequence("aec", "abcde")` returns True but should '
                "return False: every character must be found, in order.",
            ),
            Bug(
                "position < len(small) and ",
                "",
                'is_subsequence crashes after a full match\n\n`is_subsequence("ab", "abc")` raises IndexError but '
                "should return True.",
            ),
            Bug(
                "for ch in big:",
                "for ch in big[1:]:",
                'is_subsequence ignores the first character\n\n`is_subsequence("ace", "abcde")` returns False but '
                "should return True.",
            ),
            Bug(
                "position == len(small)",
                "position == len(big)",
                'is_subsequence compares with the wrong length\n\n`is_subsequence("ace", "abcde")` returns False '
                "but should return True.",
            ),
        ],
    ),
    _f(
        "sum_range",
        "intervals",
        "sum_range",
        '''
def sum_range(start, stop):
    """Sum of the integers from start to stop, both included (0 if start > stop)."""
    total = 0
    for n in range(start, stop + 1):
        total += n
    return total
''',
        [
            Case("small", "assert sum_range(1, 4) == 10"),
            Case("one_number", "assert sum_range(3, 3) == 3"),
            Case("backwards", "assert sum_range(5, 2) == 0"),
            Case("around_zero", "assert sum_range(-2, 2) == 0"),
            Case("zero", "assert sum_range(0, 0) == 0"),
            Case("tens", "assert sum_range(10, 12) == 33"),
            Case("negatives", "assert sum_range(-3, -1) == -6"),
        ],
        [
            Bug(
                "stop + 1",
                "stop",
                "sum_range leaves out stop\n\n`sum_range(1, 4)` returns 6 but should return 10: both ends are "
                "included.",
            ),
            Bug(
                "range(start, stop + 1)",
                "range(start + 1, stop + 1)",
                "sum_range leaves out start\n\n`sum_range(1, 4)` returns 9 but should return 10: both ends are "
                "included.",
            ),
            Bug(
                "total += n",
                "total += 1",
                "sum_range counts the numbers\n\n`sum_range(1, 4)` returns 4 but should return 10, the sum "
                "1 + 2 + 3 + 4.",
            ),
            Bug(
                "total = 0\n",
                "total = start\n",
                "sum_range adds start twice\n\n`sum_range(1, 4)` returns 11 but should return 10.",
            ),
        ],
    ),
)

# The "seen functions" diagnostic (``seen_train``/``seen_eval``): the earlier bug split over the first 16 families, in
# their order. ``seen_eval`` holds one bug variation of each (``held_out_variation``), ``seen_train`` the other three.
SEEN_SPLIT_FAMILIES: tuple[str, ...] = (
    "clamp", "count_vowels", "leap_year", "sum_evens", "factorial", "reverse_words", "fahrenheit", "max_value",
    "palindrome", "digit_sum", "capitalize", "average", "fizzbuzz", "count_words", "index_of", "running_total",
)  # fmt: skip


def held_out_variation(family_index: int) -> int:
    """The bug variation (1-based) of the ``family_index``-th of ``SEEN_SPLIT_FAMILIES`` that ``seen_eval`` holds
    out: rotated so that every variation slot (a family's first bug, second, ...) is held out equally often."""
    return family_index % 4 + 1


# Families whose functions share an idiom (the same loop with the comparison turned round, the inverse formula, the
# same counting pattern): family name -> the name of its group. The family split keeps a group on one side, so an
# eval function is never a near-copy of a trained one.
RELATED: dict[str, str] = {
    "min_value": "max_value", "second_largest": "max_value", "to_celsius": "fahrenheit", "count_char": "count_vowels",
    "lcm": "gcd", "last_index_of": "index_of", "product": "factorial", "power": "factorial",
    "count_positive": "sum_evens", "median": "average",
}  # fmt: skip
