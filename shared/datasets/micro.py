"""Generate the ``swe_micro`` dataset (families x bug variations) deterministically from ``micro_families.py``.

Each task is a tiny repository: one module holding one function with one bug, ``pytest.ini``, and
``tests/test_<function>.py`` with the behaviour cases the bug does not break (PASS_TO_PASS). The hidden
``test_patch`` adds ``tests/test_<function>_issue.py`` with the cases it breaks (FAIL_TO_PASS); the reference
solution restores the correct function. Which case falls where is decided by running every case against the
buggy and the correct source here, in-process, so the lists can never disagree with the code:

- a variation whose bug breaks no case would be a free reward: the build refuses it;
- a correct source that fails one of its own cases would make tasks impossible: the build refuses it.
``tests/integration/test_dataset_swe_micro.py`` checks both again through the real grader (reward 0 unchanged,
1 with the solution).

Output (``shared/datasets/swe_micro/``): ``repos/<instance>/``, ``solutions/<instance>.patch``, ``tasks.jsonl``
and ``splits.json``: instance ids per split — ``train``/``eval`` hold out one bug variation of every family of
``FAMILIES``, ``train_families``/``eval_families`` hold out whole families, and the ``TRAIN_ONLY_FAMILIES`` are in
``train_families`` only (``micro_families.py`` says why each).

    python -m shared.datasets.micro [--check]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from shared.datasets import DATASETS_DIR
from shared.datasets.build import PROTECTED_PATHS, TEST_TIMEOUT_S
from shared.datasets.micro_families import (
    FAMILIES,
    FAMILY_SPLITS,
    TRAIN_ONLY_FAMILIES,
    Bug,
    Case,
    Family,
    held_out_variation,
)
from shared.tasks import DirSource, Task, commit_tree, dump_tasks, run_git

NAME = "swe_micro"
ROOT = DATASETS_DIR / NAME
PYTEST_INI = "[pytest]\ntestpaths = tests\n"


class MicroBuildError(RuntimeError):
    """A family or variation would make a defective task (free reward, impossible, ambiguous edit)."""


def buggy_source(family: Family, bug: Bug) -> str:
    if family.source.count(bug.old) != 1:
        raise MicroBuildError(f"{family.name}: bug text {bug.old!r} must occur exactly once in the source")
    return family.source.replace(bug.old, bug.new)


def case_passes(source: str, case: Case) -> bool:
    """Run one case against ``source`` in a fresh namespace (what its pytest test does)."""
    import pytest

    namespace: dict[str, object] = {"pytest": pytest}
    try:
        exec(compile(source, "<module>", "exec"), namespace)
        exec(compile(f"def _check():\n    {case.check}\n_check()\n", "<case>", "exec"), namespace)
    except Exception:  # an assertion or any crash: the test fails
        return False
    return True


def test_file(family: Family, cases: list[Case]) -> str:
    uses_pytest = any("pytest." in c.check for c in cases)
    head = ("import pytest\n" if uses_pytest else "") + f"from {family.module} import {family.function}\n"
    return head + "".join(f"\n\ndef test_{c.name}():\n    {c.check}\n" for c in cases)


def instance_id(family: Family, index: int) -> str:
    return f"{family.name.replace('_', '-')}-{index}"


def splits_of(family_index: int, family: Family, variation: int) -> tuple[str, ...]:
    """The splits a task belongs to: its family split, and the variation split unless its family only trains
    (``TRAIN_ONLY_FAMILIES`` stay out of ``train``/``eval``, whose figures they would change)."""
    (by_family,) = [name for name, members in FAMILY_SPLITS.items() if family.name in members]
    if family_index >= len(FAMILIES):
        return (by_family,)
    return ("eval" if variation == held_out_variation(family_index) else "train"), by_family


def _git_diff(repo: Path, base_commit: str) -> str:
    run_git(repo, "add", "-A")
    diff = run_git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", base_commit).decode()
    run_git(repo, "reset", "-q", "--hard", base_commit)
    run_git(repo, "clean", "-q", "-fdx")
    return diff


def build_variation(family: Family, index: int, bug: Bug) -> tuple[Task, dict[str, str], str]:
    """The task, its repository files (relative path -> text) and its solution patch."""
    buggy = buggy_source(family, bug)
    broken = [c for c in family.cases if not case_passes(buggy, c)]
    kept = [c for c in family.cases if case_passes(buggy, c)]
    iid = instance_id(family, index)
    if not broken:
        raise MicroBuildError(f"{iid}: the bug breaks no case (the task would be a free reward)")
    module_file = f"{family.module}.py"
    visible = f"tests/test_{family.function}.py"
    hidden = f"tests/test_{family.function}_issue.py"
    files = {module_file: buggy, "pytest.ini": PYTEST_INI}
    if kept:
        files[visible] = test_file(family, kept)
    with tempfile.TemporaryDirectory(prefix="harnessrl-micro-") as tmp:
        repo = Path(tmp) / "repo"
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        base_commit = commit_tree(repo)
        (repo / hidden).parent.mkdir(exist_ok=True)
        (repo / hidden).write_text(test_file(family, broken))
        test_patch = _git_diff(repo, base_commit)
        (repo / module_file).write_text(family.source)
        solution = _git_diff(repo, base_commit)
    task = Task(
        instance_id=iid,
        repo=f"harnessrl/micro-{family.module}",
        source=DirSource(kind="dir", path=f"repos/{iid}"),
        base_commit=base_commit,
        problem_statement=bug.statement,
        FAIL_TO_PASS=[f"{hidden}::test_{c.name}" for c in broken],
        PASS_TO_PASS=[f"{visible}::test_{c.name}" for c in kept],
        test_patch=test_patch,
        protected_paths=list(PROTECTED_PATHS),
        test_timeout_s=TEST_TIMEOUT_S,
    )
    return task, files, solution


def check_family(family: Family) -> None:
    failing = [c.name for c in family.cases if not case_passes(family.source, c)]
    if failing:
        raise MicroBuildError(
            f"{family.name}: the correct source fails {failing} (tasks would be impossible)"
        )


def generate() -> dict[Path, str]:
    """Every generated file of ``swe_micro`` (absolute path -> text)."""
    families = (*FAMILIES, *TRAIN_ONLY_FAMILIES)
    names = [f.name for f in families]
    in_splits = [name for members in FAMILY_SPLITS.values() for name in members]
    if sorted(names) != sorted(in_splits) or len(set(in_splits)) != len(in_splits):
        raise MicroBuildError("every family must be in exactly one split")
    out: dict[Path, str] = {}
    tasks: list[Task] = []
    splits: dict[str, list[str]] = {name: [] for name in ("train", "eval", *FAMILY_SPLITS)}
    for family_index, family in enumerate(families):
        check_family(family)
        for index, bug in enumerate(family.bugs, start=1):
            task, files, solution = build_variation(family, index, bug)
            tasks.append(task)
            for split in splits_of(family_index, family, index):
                splits[split].append(task.instance_id)
            for rel, text in files.items():
                out[ROOT / "repos" / task.instance_id / rel] = text
            out[ROOT / "solutions" / f"{task.instance_id}.patch"] = solution
    out[ROOT / "tasks.jsonl"] = dump_tasks(tasks)
    out[ROOT / "splits.json"] = json.dumps(splits, indent=2) + "\n"
    return out


def stale_files(files: dict[Path, str]) -> list[str]:
    """Generated files that differ on disk, and files on disk the generator no longer makes."""
    stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
    for folder in ("repos", "solutions"):
        for path in sorted((ROOT / folder).rglob("*")) if (ROOT / folder).is_dir() else []:
            if path.is_file() and path not in files:
                stale.append(f"{path} (not generated)")
    return stale


def main(argv: list[str]) -> int:
    files = generate()
    if "--check" in argv:
        stale = stale_files(files)
        if stale:
            print("stale swe_micro files (run python -m shared.datasets.micro):\n  " + "\n  ".join(stale))
            return 1
        return 0
    for folder in ("repos", "solutions"):
        shutil.rmtree(ROOT / folder, ignore_errors=True)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files for dataset {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
