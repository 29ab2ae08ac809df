"""The grader's test run on a real sandbox: the launcher keeps the standard library out of the repository's reach
even for files the screening does not see, a task's own test command still works (its report outside the
checkout too), and a ``stop_check`` ends a grading without a verdict (``GradingStopped``; ``grade_rollout``:
action ``cancelled``, the rollout ``cancelled``, no reward)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from services.grader.grade import GradingStopped, grade_patch, grade_rollout
from shared.datasets import load_dataset, reference_patch
from shared.db import session_scope
from shared.models import Reward, Rollout
from shared.sandbox import Sandbox
from shared.settings import Settings
from shared.tasks import Task, base_commit_of_dir, materialize, run_git

pytestmark = pytest.mark.integration

TASK = next(t for t in load_dataset("swe_mini") if t.instance_id == "textkit-1")
SOLUTION = reference_patch("swe_mini", TASK.instance_id)


def _hang_patch() -> bytes:
    """The agent's diff when ``textkit/__init__.py`` sleeps for ten minutes at import."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = materialize(TASK, Path(tmp) / "repo")
        (repo / "textkit" / "__init__.py").write_text("import time\n\ntime.sleep(600)\n")
        run_git(repo, "add", "-A")
        return run_git(repo, "diff", "--cached", "--binary", TASK.base_commit)


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


def test_a_base_module_named_like_the_standard_library_is_not_what_the_tests_import(
    box: Sandbox, tmp_path: Path
) -> None:
    # python -m pytest put the repository first on sys.path: this json.py would have been every `import json`.
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "json.py").write_text("raise SystemExit('the repository json.py was imported')\n")
    (repo / "tests" / "test_j.py").write_text(
        "import json\n\n\ndef test_stdlib_json(answer):\n    assert json.dumps([answer]) == '[42]'\n"
    )
    # The base commit's own conftest.py is the task's, and still loads.
    (repo / "conftest.py").write_text("import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n")
    task = Task(
        instance_id="stdlib-json",
        repo="t/json",
        source={"kind": "dir", "path": str(repo)},
        base_commit=base_commit_of_dir(repo),
        problem_statement="nothing to fix",
        FAIL_TO_PASS=["tests/test_j.py::test_stdlib_json"],
    )
    report = grade_patch(task, b"", sandbox=box)
    assert (report.outcome, report.reward) == ("graded", 1.0), report.log_text


def test_a_task_command_that_is_not_plain_pytest_still_runs(box: Sandbox) -> None:
    task = TASK.model_copy(update={"test_command": "cd . && " + TASK.test_command})
    report = grade_patch(task, SOLUTION.encode(), sandbox=box)
    assert (report.outcome, report.reward) == ("graded", 1.0), report.log_text
    assert "test runner: the task's command" in report.log_text


def test_a_stop_check_ends_the_test_run_without_a_verdict(box: Sandbox) -> None:
    started = time.monotonic()
    with pytest.raises(GradingStopped) as stopped:
        grade_patch(TASK, _hang_patch(), sandbox=box, stop_check=lambda: "run_stopped")
    assert stopped.value.reason == "run_stopped"
    assert time.monotonic() - started < 60


def test_grade_rollout_stopped_is_cancelled_with_no_reward(
    box: Sandbox, finished_group, db, store, redis_client
) -> None:  # type: ignore[no-untyped-def]
    _, _, [rollout_id] = finished_group(TASK, [_hang_patch().decode()])
    outcome = grade_rollout(
        rollout_id, db=db, store=store, sandbox=box, redis_client=redis_client, timeout_s=120,
        stop_check=lambda: "run_stopped",
    )  # fmt: skip
    assert (outcome.action, outcome.reward) == ("cancelled", None)
    with session_scope(db) as session:
        row = session.get(Rollout, rollout_id)
        assert row is not None
        assert (row.status, row.outcome, row.outcome_reason) == ("cancelled", "cancelled", "run_stopped")
        assert session.query(Reward).filter_by(rollout_id=rollout_id).count() == 0
