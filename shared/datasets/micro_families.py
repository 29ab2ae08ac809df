"""The function families of the ``swe_micro`` dataset: data only (``shared/datasets/micro.py`` generates tasks).

A family is one small, correct Python function in its own module, a list of behaviour cases (each becomes one
pytest test) and a few bug variations. A variation is one textual edit that turns the correct source into the
buggy base of a task, plus the issue text a user would file about it. ``micro.py`` computes which cases the bug
breaks (FAIL_TO_PASS) and which still pass (PASS_TO_PASS) by running them, and refuses a variation whose bug
breaks no case (a free reward) or whose correct source fails a case (an impossible task).

Families are split between ``train`` and ``eval`` by name (``SPLITS``), never within a family, so an eval
task's function is one the policy never trained on.
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
                "to_fahrenheit uses the inverse ratio\n\n`to_fahrenheit(100)` returns 87.6 but should return 212: "
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
    # --- eval families ---------------------------------------------------------------------------------
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
)

# Functions that only ever train (``train_families``), never in the bug split, so the bug split's figures stay
# comparable: more distinct functions to learn the answer's discipline from (one code block holding the whole
# function, changed only where the issue says) without widening what ``eval_families`` is compared against. None of
# them repeats an idiom of an ``eval_families`` function (no parity test, no vowel or word counting, no running sum,
# no maximum, no temperature formula).
TRAIN_ONLY_FAMILIES: tuple[Family, ...] = (
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
        ],
        [
            Bug(
                "if n < 2:",
                "if n < 1:",
                "is_prime says 1 is prime\n\n`is_prime(1)` returns True but should return False.",
            ),
            Bug(
                "range(2, n)",
                "range(3, n)",
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
                "percentage rounds too early\n\n`percentage(1, 3)` returns 30.000000000000004 but should return 33.3.",
            ),
        ],
    ),
)

# Base pass@1 of SmolLM2-135M-Instruct per family (codeblock harness, temperature 0.7, 3 samples x 4 tasks, seed 0;
# 2026-12-02, docs/perf/learning.md "Calibration"), highest first. The family split is stratified by it: families
# ranked by that rate (ties by name), and ranks 1, 3, 6, 9, 12 and 15 (0-based) go to ``eval_families``, so both
# sides hold easy, middling and unsolved families alike (measured: 19/120 and 13/72). An earlier, unstratified split
# put five of the six hardest families on the held-out side (base pass@1 7-11%, most tasks 0/3).
BASE_SOLVED_OF_12 = {
    "factorial": 6, "fahrenheit": 6, "palindrome": 5, "max_value": 4, "count_words": 3, "leap_year": 3,
    "sum_evens": 2, "average": 1, "index_of": 1, "reverse_words": 1, "capitalize": 0, "clamp": 0,
    "count_vowels": 0, "digit_sum": 0, "fizzbuzz": 0, "running_total": 0,
}  # fmt: skip
EVAL_RANKS = (1, 3, 6, 9, 12, 15)
_RANKED = sorted(BASE_SOLVED_OF_12, key=lambda name: (-BASE_SOLVED_OF_12[name], name))
FAMILY_SPLITS: dict[str, tuple[str, ...]] = {
    "train_families": (
        *(name for rank, name in enumerate(_RANKED) if rank not in EVAL_RANKS),
        *(f.name for f in TRAIN_ONLY_FAMILIES),
    ),
    "eval_families": tuple(_RANKED[rank] for rank in EVAL_RANKS),
}
"""Held-out *functions*: no family of ``eval_families`` is ever trained on (transfer across functions)."""


# The variation split (``train``/``eval``) holds out bugs: ``eval`` holds one bug variation of every family
# (``held_out_variation``), ``train`` the other three, so an eval task is a bug, issue text and fix never trained on,
# in a function trained on through other bugs — the usual train/test split of one task distribution. ``bench
# learning`` measures on it; ``eval_families`` measures the harder transfer to functions never trained on.
def held_out_variation(family_index: int) -> int:
    """The bug variation (1-based) of the ``family_index``-th family that ``eval`` holds out: rotated over the
    families so that every variation slot (the first bug of a family, the second, ...) is held out equally often."""
    return family_index % 4 + 1
