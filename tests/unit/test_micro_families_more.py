"""The families of ``micro_families_more.py`` make sound tasks: checked in-process with ``micro.py``'s own functions.

Every correct source passes all its cases; every bug applies at exactly one spot, yields its own buggy source, and
fails at least one assert whose call the issue does not quote (so hard-coding the issue's example cannot pass).
"""

from __future__ import annotations

import sys

import pytest

from shared.datasets.micro import ALL_FAMILIES, buggy_source, calls_in, case_passes, quoted
from shared.datasets.micro_families import FAMILIES, Case, Family
from shared.datasets.micro_families_more import MORE_FAMILIES, MORE_RELATED

MIN_CASES = 6
MIN_ASSERTS = 7


def _asserts(family: Family) -> list[str]:
    return [line.strip() for case in family.cases for line in case.check.split("\n") if line.strip()]


@pytest.mark.parametrize("family", MORE_FAMILIES, ids=lambda f: f.name)
def test_correct_source_passes_every_case(family: Family) -> None:
    assert len(family.cases) >= MIN_CASES
    assert len(_asserts(family)) >= MIN_ASSERTS
    assert all(line.startswith("assert ") for line in _asserts(family))
    assert len({c.name for c in family.cases}) == len(family.cases)
    assert [c.name for c in family.cases if not case_passes(family.source, c)] == []


@pytest.mark.parametrize("family", MORE_FAMILIES, ids=lambda f: f.name)
def test_every_bug_fails_an_assert_the_issue_does_not_quote(family: Family) -> None:
    assert len(family.bugs) >= 3
    sources = set()
    for bug in family.bugs:
        buggy = buggy_source(family, bug)
        sources.add(buggy)
        title, blank, example = bug.statement.split("\n")[:3]
        assert title and blank == "" and example.startswith(f"`{family.function}(")
        unquoted_failures = [
            line
            for line in _asserts(family)
            if not case_passes(buggy, Case("line", line))
            and any(not quoted(call, bug.statement) for call in calls_in(family.function, line))
        ]
        assert unquoted_failures, f"{family.name}: {bug.old!r} breaks no assert beyond the issue's example"
    assert len(sources) == len(family.bugs), f"{family.name}: two bugs make the same buggy source"


def test_names_are_unique_and_clash_with_nothing() -> None:
    old = {f.name for f in FAMILIES} | {f.module for f in FAMILIES} | {f.function for f in FAMILIES}
    for attribute in ("name", "module", "function"):
        values = [getattr(f, attribute) for f in MORE_FAMILIES]
        assert len(set(values)) == len(values)
        assert not set(values) & old
    modules = {f.module for f in MORE_FAMILIES}
    assert not modules & set(sys.stdlib_module_names)
    assert not modules & {"pytest", "_pytest", "pluggy", "py", "conftest", "iniconfig", "packaging"}
    assert set(MORE_FAMILIES) <= set(ALL_FAMILIES)
    known = {f.name for f in ALL_FAMILIES}
    assert set(MORE_RELATED) <= {f.name for f in MORE_FAMILIES}
    assert set(MORE_RELATED.values()) <= known
