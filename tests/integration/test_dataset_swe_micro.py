"""The generated ``swe_micro`` suite: at least 48 tasks, train (>= 32) and eval (>= 16) over disjoint function
families, generated files current, and no defective task: through the real grader, every task scores 0.0
unchanged (no free reward: every FAIL_TO_PASS test fails, every PASS_TO_PASS test passes) and 1.0 with its
reference solution (nothing impossible). The generator refuses a bug that breaks no case and a family whose
correct source fails one of its own cases."""

from __future__ import annotations

import pytest

from services.grader.grade import grade_patch
from shared.datasets import UnknownSplit, available_datasets, dataset_splits, load_dataset, reference_patch
from shared.datasets.micro import MicroBuildError, build_variation, check_family, generate, stale_files
from shared.datasets.micro_families import FAMILIES, FAMILY_SPLITS, TRAIN_ONLY_FAMILIES, Bug, Case, Family
from shared.sandbox import Sandbox
from shared.settings import Settings
from shared.tasks import DirSource, base_commit_of_dir

pytestmark = pytest.mark.integration

TASKS = load_dataset("swe_micro")
FAMILY_OF = {t.instance_id: t.repo for t in TASKS}
TRAIN_ONLY = {f.name.replace("_", "-") for f in TRAIN_ONLY_FAMILIES}


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


def test_splits_hold_out_one_bug_of_every_family_and_whole_families() -> None:
    assert "swe_micro" in available_datasets()
    splits = dataset_splits("swe_micro")
    assert set(splits) == {"train", "eval", "train_families", "eval_families"} and len(TASKS) >= 48
    # The bug split covers the functions of FAMILIES; the family split every task (TRAIN_ONLY_FAMILIES train only).
    train_only = {t.instance_id for t in TASKS if t.instance_id.rsplit("-", 1)[0] in TRAIN_ONLY}
    assert len(train_only) == 4 * len(TRAIN_ONLY_FAMILIES)
    for (train_name, held_out_name), covered in (
        (("train", "eval"), len(TASKS) - len(train_only)),
        (("train_families", "eval_families"), len(TASKS)),
    ):
        train, held_out = load_dataset("swe_micro", train_name), load_dataset("swe_micro", held_out_name)
        assert len(train) >= 32 and len(held_out) >= 16 and len(train) + len(held_out) == covered
        assert not {t.instance_id for t in train} & {t.instance_id for t in held_out}
    assert train_only <= {t.instance_id for t in load_dataset("swe_micro", "train_families")}
    # eval: one variation of each of the 16 functions of FAMILIES, none of them trained on.
    held_out = load_dataset("swe_micro", "eval")
    assert sorted(t.instance_id.rsplit("-", 1)[0] for t in held_out) == sorted(
        f.name.replace("_", "-") for f in FAMILIES
    )
    assert {t.instance_id.rsplit("-", 1)[1] for t in held_out} == {"1", "2", "3", "4"}
    # eval_families: whole functions never trained on.
    families = [load_dataset("swe_micro", name) for name in ("train_families", "eval_families")]
    assert not {t.repo for t in families[0]} & {t.repo for t in families[1]}
    assert len({t.repo for t in families[1]}) >= 4
    with pytest.raises(UnknownSplit, match="no split 'test'"):
        load_dataset("swe_micro", "test")


def test_generated_files_are_current() -> None:
    assert stale_files(generate()) == [], "run python -m shared.datasets.micro"
    for task in TASKS:
        assert isinstance(task.source, DirSource)
        assert base_commit_of_dir(task.source.path) == task.base_commit  # type: ignore[arg-type]
        assert "tests" in task.protected_paths and task.test_patch and task.FAIL_TO_PASS


def test_generator_refuses_free_rewards_and_impossible_tasks() -> None:
    family = FAMILIES[0]
    harmless = Bug('"""Limit', '"""Clamp', "a docstring edit\n\nbreaks nothing")
    with pytest.raises(MicroBuildError, match="free reward"):
        build_variation(family, 9, harmless)
    wrong = Family(family.name, family.module, family.function, family.source,
                   (*family.cases, Case("wrong", "assert clamp(1, 0, 10) == 2")), family.bugs)  # fmt: skip
    with pytest.raises(MicroBuildError, match="impossible"):
        check_family(wrong)
    families = (*FAMILIES, *TRAIN_ONLY_FAMILIES)
    assert sorted(f.name for f in families) == sorted(n for names in FAMILY_SPLITS.values() for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.instance_id for t in TASKS])
def test_unchanged_scores_zero_and_reference_solution_scores_one(task, box: Sandbox) -> None:  # type: ignore[no-untyped-def]
    unsolved = grade_patch(task, b"", sandbox=box)
    assert (unsolved.reward, unsolved.outcome) == (0.0, "graded"), unsolved.log_text[-3000:]
    assert set(unsolved.tests["FAIL_TO_PASS"].values()) == {"failed"}, unsolved.tests
    assert set(unsolved.tests["PASS_TO_PASS"].values()) <= {"passed"}, unsolved.tests
    solved = grade_patch(task, reference_patch("swe_micro", task.instance_id).encode(), sandbox=box)
    assert (solved.reward, solved.resolved, solved.outcome) == (1.0, True, "graded"), solved.log_text[-3000:]
