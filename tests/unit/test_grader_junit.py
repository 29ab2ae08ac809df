"""Per-test outcomes from junit XML and the reward functions."""

from __future__ import annotations

import pytest

from services.grader.grade import (
    ListedOutcomes,
    get_reward_function,
    junit_key,
    outcome_of,
    parse_junit,
    reward_function,
)

pytestmark = pytest.mark.unit

JUNIT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="7">
  <testcase classname="tests.test_a" name="test_ok" time="0.001"/>
  <testcase classname="tests.test_a" name="test_bad"><failure message="assert 1 == 2">x</failure></testcase>
  <testcase classname="tests.test_a.TestGroup" name="test_inner"/>
  <testcase classname="tests.test_b" name="test_skip"><skipped message="no"/></testcase>
  <testcase classname="tests.test_b" name="test_param[1]"/>
  <testcase classname="tests.test_b" name="test_param[2]"><error message="boom"/></testcase>
  <testcase classname="tests.test_b" name="test_teardown"/>
  <testcase classname="tests.test_b" name="test_teardown"><error message="teardown failed"/></testcase>
</testsuite></testsuites>"""


def test_node_ids_map_to_junit_names() -> None:
    assert junit_key("tests/test_a.py::test_ok") == "tests.test_a::test_ok"
    assert junit_key("tests/test_a.py::TestGroup::test_inner") == "tests.test_a.TestGroup::test_inner"
    assert junit_key("test_top.py::test_x[a-b]") == "test_top::test_x[a-b]"


def test_parse_junit_outcomes() -> None:
    report = parse_junit(JUNIT)
    assert report["tests.test_a::test_ok"] == "passed"
    assert report["tests.test_a::test_bad"] == "failed"
    assert report["tests.test_b::test_skip"] == "skipped"
    assert report["tests.test_b::test_teardown"] == "error"  # a pass then a teardown error is an error


@pytest.mark.parametrize(
    ("node_id", "expected"),
    [
        ("tests/test_a.py::test_ok", "passed"),
        ("tests/test_a.py::TestGroup::test_inner", "passed"),
        ("tests/test_b.py::test_param[1]", "passed"),
        ("tests/test_b.py::test_param", "error"),  # the whole parametrization: its worst case
        ("tests/test_a.py::test_absent", "missing"),
        ("tests/test_a.py::test_o", "missing"),  # a prefix of another name is not a match
    ],
)
def test_outcome_of_listed_tests(node_id: str, expected: str) -> None:
    assert outcome_of(node_id, parse_junit(JUNIT)) == expected


def test_reward_functions() -> None:
    all_pass = ListedOutcomes({"a": "passed"}, {"b": "passed", "c": "passed"})
    one_fails = ListedOutcomes({"a": "failed"}, {"b": "passed", "c": "passed"})
    assert get_reward_function("resolved")(all_pass) == 1.0
    assert get_reward_function("resolved")(one_fails) == 0.0
    assert get_reward_function("fraction_passed")(one_fails) == pytest.approx(2 / 3)
    broken = ListedOutcomes({"a": "failed"}, {"b": "error", "c": "error"})
    partial = get_reward_function("resolved_partial")
    assert partial(all_pass) == 1.0
    assert partial(one_fails) == pytest.approx(1 / 3)  # bug left, behaviour kept: half of 2/3
    assert partial(broken) == 0.0
    with pytest.raises(
        ValueError, match="unknown reward function 'nope'; known: .*fraction_passed.*resolved"
    ):
        get_reward_function("nope")


def test_custom_reward_functions_plug_in_by_name() -> None:
    @reward_function("fail_to_pass_only")
    def fail_to_pass_only(outcomes: ListedOutcomes) -> float:
        statuses = list(outcomes.fail_to_pass.values())
        return sum(s == "passed" for s in statuses) / len(statuses)

    outcomes = ListedOutcomes({"a": "passed", "b": "failed"}, {"c": "failed"})
    assert get_reward_function("fail_to_pass_only")(outcomes) == 0.5
