"""``grade_patch`` against agents that cheat or break things: edited tests, a planted conftest (refused) or junit report,
a patch that does not apply, tests that hang, and the fraction-passed reward."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from services.grader.grade import JUNIT_FILE, grade_patch
from shared.datasets import load_dataset, reference_patch
from shared.sandbox import Sandbox
from shared.settings import Settings
from shared.tasks import materialize, run_git

pytestmark = pytest.mark.integration

TASK = next(t for t in load_dataset("swe_mini") if t.instance_id == "textkit-1")


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


def _diff(edits: dict[str, str]) -> bytes:
    """The git diff an agent leaves after writing ``edits`` (path -> new content) on the task's checkout."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = materialize(TASK, Path(tmp) / "repo")
        for path, text in edits.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        run_git(repo, "add", "-A")
        return run_git(repo, "diff", "--cached", "--binary", TASK.base_commit)


def test_editing_existing_tests_is_undone(box: Sandbox) -> None:
    # Make a PASS_TO_PASS test trivially true and keep the bug: the edit is restored, the bug still fails.
    cheat = _diff({"tests/test_slug.py": "def test_words_are_joined():\n    assert True\n"})
    report = grade_patch(TASK, cheat, sandbox=box)
    assert report.outcome == "graded" and report.reward == 0.0
    assert "agent patch: applied" in report.log_text


def test_planted_conftest_test_files_and_junit_do_not_count(box: Sandbox) -> None:
    # A conftest that turns every failure into a pass is refused outright, before anything runs.
    conftest = (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    for where in ("conftest.py", "tests/conftest.py"):
        refused = grade_patch(TASK, _diff({where: conftest}), sandbox=box)
        assert (refused.outcome, refused.reward) == ("patch_refused", 0.0)
        assert refused.reward_hack_suspected and "conftest.py" in (refused.reward_hack_reason or "")

    # A replacement for the hidden test file and a fake report where the report used to be: nothing to the grader.
    fake_tests = "def test_trailing_punctuation():\n    pass\n"
    fake_junit = '<testsuites><testsuite><testcase classname="tests.test_slug_edges" name="x"/></testsuite></testsuites>'
    cheat = _diff({"tests/test_slug_edges.py": fake_tests, JUNIT_FILE: fake_junit})
    report = grade_patch(TASK, cheat, sandbox=box)
    assert report.outcome == "graded" and report.reward == 0.0
    assert set(report.tests["FAIL_TO_PASS"].values()) == {"failed"}

    honest = grade_patch(TASK, cheat + reference_patch("swe_mini", TASK.instance_id).encode(), sandbox=box)
    assert honest.reward == 1.0  # the planted files are removed; the real fix still counts


def test_patch_that_does_not_apply(box: Sandbox) -> None:
    broken = b"diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n@@ -1,1 +1,1 @@\n-no such line\n+x\n"
    report = grade_patch(TASK, broken, sandbox=box)
    assert (report.outcome, report.reward, report.resolved) == ("patch_failed", 0.0, False)
    assert set(report.tests["FAIL_TO_PASS"].values()) == {"missing"}


def test_hanging_tests_time_out(box: Sandbox) -> None:
    hang = _diff({"textkit/__init__.py": "import time\n\ntime.sleep(600)\n"})
    task = TASK.model_copy(update={"test_timeout_s": 3.0})
    report = grade_patch(task, hang, sandbox=box)
    assert report.outcome == "tests_timed_out" and report.reward == 0.0 and report.grading_s < 30


def test_fraction_passed_counts_each_listed_test(box: Sandbox) -> None:
    report = grade_patch(TASK, b"", sandbox=box, reward_fn="fraction_passed")
    listed = len(TASK.FAIL_TO_PASS) + len(TASK.PASS_TO_PASS)
    assert report.reward == pytest.approx(len(TASK.PASS_TO_PASS) / listed) and not report.resolved
