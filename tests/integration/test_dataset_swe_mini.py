"""The bundled ``swe_mini`` suite: generated files are current, and every task is graded 1.0 with its reference
solution and 0.0 without it (every FAIL_TO_PASS test fails on the base commit, every PASS_TO_PASS test passes)."""

from __future__ import annotations

import pytest

from services.grader.grade import grade_patch
from shared.datasets import available_datasets, load_dataset, reference_patch
from shared.datasets.build import build_dataset
from shared.sandbox import Sandbox
from shared.settings import Settings
from shared.tasks import DirSource, base_commit_of_dir

pytestmark = pytest.mark.integration

TASKS = load_dataset("swe_mini")


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


def test_suite_is_large_enough_and_generated_files_are_current() -> None:
    assert "swe_mini" in available_datasets()
    assert len(TASKS) >= 12 and len({t.repo for t in TASKS}) >= 6
    for path, text in build_dataset("swe_mini").items():
        assert path.read_text() == text, f"{path} is stale: run python -m shared.datasets.build swe_mini"
    for task in TASKS:
        assert isinstance(task.source, DirSource)
        assert base_commit_of_dir(task.source.path) == task.base_commit  # type: ignore[arg-type]
        assert "tests" in task.protected_paths and task.test_patch
        assert reference_patch("swe_mini", task.instance_id).startswith("diff --git")


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.instance_id for t in TASKS])
def test_reference_solution_resolves_and_base_does_not(task, box: Sandbox) -> None:  # type: ignore[no-untyped-def]
    solved = grade_patch(task, reference_patch("swe_mini", task.instance_id).encode(), sandbox=box)
    assert (solved.reward, solved.resolved, solved.outcome) == (1.0, True, "graded"), solved.log_text[-3000:]

    unsolved = grade_patch(task, b"", sandbox=box)
    assert (unsolved.reward, unsolved.resolved, unsolved.outcome) == (0.0, False, "graded")
    assert set(unsolved.tests["FAIL_TO_PASS"].values()) == {"failed"}, unsolved.tests
    assert set(unsolved.tests["PASS_TO_PASS"].values()) <= {"passed"}, unsolved.tests
    assert solved.isolation.startswith("bwrap(")
