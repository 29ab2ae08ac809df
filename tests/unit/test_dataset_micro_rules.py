"""The ``swe_micro`` build refuses defective tasks (``shared/datasets/micro.py``): a free reward, an impossible task,
hidden tests with fewer than five asserts, failing asserts that only call the function as the issue quotes it, a case
that is not asserts, too few or duplicate bugs, shared or stdlib-shadowing names, too small an eval side; and the
family split keeps related families together. In-process, no services."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared.datasets.micro import (
    ALL_FAMILIES,
    MIN_EVAL_FAMILIES,
    MicroBuildError,
    buggy_source,
    build_variation,
    check_families,
    check_family,
    check_variation,
    eval_families,
    group_of,
)
from shared.datasets.micro_families import Bug, Case, Family, _f

DOUBLE = _f(
    "double",
    "doubling",
    "double",
    '''
def double(x):
    """Twice x."""
    return x * 2
''',
    [
        Case("two", "assert double(2) == 4"),
        Case("zero", "assert double(0) == 0"),
        Case("negative", "assert double(-3) == -6"),
        Case("more", "assert double(50) == 100\n    assert double(7) == 14"),
    ],
    [
        Bug("x * 2", "x + 2", "double adds\n\n`double(3)` returns 5 but should return 6."),
        Bug("x * 2", "x * 3", "double triples\n\n`double(3)` returns 9 but should return 6."),
        Bug("x * 2", "x ** 2", "double squares\n\n`double(3)` returns 9 but should return 6."),
    ],
)


def variation(family: Family, bug: Bug) -> tuple[list[Case], list[Case]]:
    return check_variation(family, bug, buggy_source(family, bug))


def test_a_sound_variation_splits_the_spec_into_failing_and_passing_cases() -> None:
    broken, kept = variation(DOUBLE, DOUBLE.bugs[0])
    assert [c.name for c in broken] == ["zero", "negative", "more"] and [c.name for c in kept] == ["two"]
    check_family(DOUBLE)
    task, files, solution = build_variation(DOUBLE, 1, DOUBLE.bugs[0])
    # The hidden spec holds every case; the visible file only the ones the bug does not break.
    assert all(f"def test_{c.name}():" in task.test_patch for c in DOUBLE.cases)
    assert files["tests/test_double.py"].count("def test_") == 1 and files["doubling.py"].endswith("x + 2\n")
    assert [f"tests/test_double_spec.py::test_{n}" for n in ("zero", "negative", "more")] == task.FAIL_TO_PASS
    assert task.PASS_TO_PASS == ["tests/test_double_spec.py::test_two"] and "+    return x * 2" in solution


def test_a_bug_that_breaks_nothing_is_a_free_reward() -> None:
    with pytest.raises(MicroBuildError, match="free reward"):
        variation(DOUBLE, Bug('"""Twice', '"""Double', "a docstring edit\n\nbreaks nothing"))


def test_a_case_the_correct_source_fails_makes_tasks_impossible() -> None:
    wrong = replace(DOUBLE, cases=(*DOUBLE.cases, Case("wrong", "assert double(1) == 3")))
    with pytest.raises(MicroBuildError, match="impossible"):
        check_family(wrong)


def test_fewer_than_five_hidden_asserts_are_refused() -> None:
    four = replace(DOUBLE, cases=DOUBLE.cases[:3] + (Case("more", "assert double(50) == 100"),))
    with pytest.raises(MicroBuildError, match="4 hidden asserts, fewer than 5"):
        variation(four, four.bugs[0])


def test_failing_asserts_only_on_quoted_inputs_are_refused() -> None:
    # x * 2 or 1 is wrong only for 0: the one failing assert is double(0), which this issue quotes.
    zero_bug = Bug("x * 2", "x * 2 or 1", "double of zero\n\n`double(0)` returns 1 but should return 0.")
    with pytest.raises(MicroBuildError, match="hard-coding"):
        variation(DOUBLE, zero_bug)
    # Whitespace does not hide a quote; an issue that quotes every failing call is refused too.
    quoting_all = Bug(
        "x * 2",
        "x + 2",
        "double adds\n\n`double( 0 )` returns 2, `double(-3)` -1, `double(50)` 52 and `double(7)` 9.",
    )
    with pytest.raises(MicroBuildError, match="hard-coding"):
        variation(DOUBLE, quoting_all)
    # A failing case mixing a quoted failing assert with an unquoted passing one does not count either.
    mixed = replace(DOUBLE, cases=(*DOUBLE.cases[:1], Case("mixed", "assert double(0) == 0\n    assert double(2) == 4"),
                                   *DOUBLE.cases[2:]))  # fmt: skip
    with pytest.raises(MicroBuildError, match="hard-coding"):
        variation(mixed, zero_bug)


def test_a_case_that_is_not_asserts_is_refused() -> None:
    loop = replace(
        DOUBLE, cases=(*DOUBLE.cases, Case("loop", "for x in range(3):\n        assert double(x) == 2 * x"))
    )
    with pytest.raises(MicroBuildError, match="assert lines"):
        variation(loop, loop.bugs[0])


def test_too_few_or_duplicate_bugs_are_refused() -> None:
    with pytest.raises(MicroBuildError, match="2 bugs, fewer than 3"):
        check_family(replace(DOUBLE, bugs=DOUBLE.bugs[:2]))
    with pytest.raises(MicroBuildError, match="same buggy source"):
        check_family(
            replace(DOUBLE, bugs=(*DOUBLE.bugs[:2], replace(DOUBLE.bugs[0], statement="again\n\nx")))
        )


def test_shared_names_stdlib_modules_and_a_small_eval_side_are_refused() -> None:
    with pytest.raises(MicroBuildError, match="unknown families"):
        check_families(ALL_FAMILIES, related={"double": "clamp"})
    twin = replace(DOUBLE, name="double_again", function="double_again")
    with pytest.raises(MicroBuildError, match="share a module"):
        check_families((*ALL_FAMILIES, DOUBLE, twin))
    with pytest.raises(MicroBuildError, match="standard library"):
        check_families((*ALL_FAMILIES, replace(DOUBLE, module="string")))
    with pytest.raises(MicroBuildError, match=f"fewer than {MIN_EVAL_FAMILIES}"):
        check_families(ALL_FAMILIES[: 2 * MIN_EVAL_FAMILIES], related={})


def test_the_family_split_keeps_related_families_together_and_is_stable_when_families_are_appended() -> None:
    held_out = eval_families()
    assert len(held_out) >= MIN_EVAL_FAMILIES
    for a, b in (
        ("max_value", "min_value"),
        ("fahrenheit", "to_celsius"),
        ("gcd", "lcm"),
        ("index_of", "last_index_of"),
    ):
        assert group_of(a, {}) != group_of(b, {}) and (a in held_out) == (b in held_out)
    # Appending a family moves no earlier family across the split.
    assert eval_families((*ALL_FAMILIES, DOUBLE)) - {"double"} == held_out
    with pytest.raises(MicroBuildError, match="cycle"):
        group_of("a", {"a": "b", "b": "a"})
