"""The generated ``swe_micro`` suite: train and eval over disjoint families (eval at least 20 families, 3 or more
bugs each), the "seen functions" bug split over the 16 first families, generated files current, and no defective
task: through the real grader, every task scores 0.0 unchanged (no free reward: every FAIL_TO_PASS test fails,
every PASS_TO_PASS test passes) and 1.0 with its reference solution (nothing impossible). The build rules themselves
(free rewards, impossible tasks, weak or hard-codable tests) are tested in ``tests/unit/test_dataset_micro_rules.py``,
the split's leaks in ``tests/unit/test_dataset_split.py``."""

from __future__ import annotations

from collections import Counter

import pytest

from services.grader.grade import grade_patch
from shared.datasets import UnknownSplit, available_datasets, dataset_splits, load_dataset, reference_patch
from shared.datasets.micro import ALL_FAMILIES, MIN_EVAL_FAMILIES, generate, stale_files
from shared.datasets.micro_families import SEEN_SPLIT_FAMILIES
from shared.sandbox import Sandbox
from shared.settings import Settings
from shared.tasks import DirSource, base_commit_of_dir

pytestmark = pytest.mark.integration

TASKS = load_dataset("swe_micro")


def family_of(instance_id: str) -> str:
    return instance_id.rsplit("-", 1)[0]


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


def test_eval_holds_out_whole_families_and_seen_split_holds_out_bugs() -> None:
    assert "swe_micro" in available_datasets()
    assert set(dataset_splits("swe_micro")) == {"train", "eval", "seen_train", "seen_eval"}
    assert len(TASKS) == sum(len(f.bugs) for f in ALL_FAMILIES) >= 180
    train, held_out = load_dataset("swe_micro", "train"), load_dataset("swe_micro", "eval")
    assert len(train) + len(held_out) == len(TASKS)
    train_families = Counter(family_of(t.instance_id) for t in train)
    eval_families = Counter(family_of(t.instance_id) for t in held_out)
    assert not set(train_families) & set(eval_families)
    assert len(eval_families) >= MIN_EVAL_FAMILIES and min(eval_families.values()) >= 3
    assert len(train_families) >= 40
    # seen_eval: one variation of each of the 16 first functions, seen_train their other bugs.
    seen_train, seen_eval = load_dataset("swe_micro", "seen_train"), load_dataset("swe_micro", "seen_eval")
    assert sorted(family_of(t.instance_id) for t in seen_eval) == sorted(
        name.replace("_", "-") for name in SEEN_SPLIT_FAMILIES
    )
    assert {t.instance_id.rsplit("-", 1)[1] for t in seen_eval} == {"1", "2", "3", "4"}
    assert len(seen_train) == 48 and not {t.instance_id for t in seen_train} & {
        t.instance_id for t in seen_eval
    }
    with pytest.raises(UnknownSplit, match="no split 'test'"):
        load_dataset("swe_micro", "test")


def test_generated_files_are_current() -> None:
    assert stale_files(generate()) == [], "run python -m shared.datasets.micro"
    for task in TASKS:
        assert isinstance(task.source, DirSource)
        assert base_commit_of_dir(task.source.path) == task.base_commit  # type: ignore[arg-type]
        assert "tests" in task.protected_paths and task.test_patch and task.FAIL_TO_PASS


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.instance_id for t in TASKS])
def test_unchanged_scores_zero_and_reference_solution_scores_one(task, box: Sandbox) -> None:  # type: ignore[no-untyped-def]
    unsolved = grade_patch(task, b"", sandbox=box)
    assert (unsolved.reward, unsolved.outcome) == (0.0, "graded"), unsolved.log_text[-3000:]
    assert set(unsolved.tests["FAIL_TO_PASS"].values()) == {"failed"}, unsolved.tests
    assert set(unsolved.tests["PASS_TO_PASS"].values()) <= {"passed"}, unsolved.tests
    solved = grade_patch(task, reference_patch("swe_micro", task.instance_id).encode(), sandbox=box)
    assert (solved.reward, solved.resolved, solved.outcome) == (1.0, True, "graded"), solved.log_text[-3000:]
