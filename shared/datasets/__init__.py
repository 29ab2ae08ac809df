"""Bundled task suites (``shared/datasets/<name>/``) and how to read them.

A dataset folder holds ``tasks.jsonl`` (loadable with ``shared.tasks.load_tasks``), the repositories its tasks
come from (``repos/``, plain files committed deterministically, see ``shared.tasks``), and the reference
solutions (``solutions/<instance_id>.patch``). Solutions exist to test the suite and the grader; nothing hands
them to an agent. ``tasks.jsonl`` and ``solutions/`` are generated from ``cases/`` by ``shared.datasets.build``
(``swe_mini``) or from function families by ``shared.datasets.micro`` (``swe_micro``).

A dataset may name splits in ``splits.json`` (``{"train": [instance ids], "eval": [...]}``); ``load_dataset(name,
split)`` returns one split's tasks in that order. Without the file a dataset has no splits. A split named ``eval`` or
ending in ``_eval`` (``seen_eval``) is an **eval split** (``is_eval_split``): held out from training, so nothing may
show a policy its reference fixes (``--teacher reference`` is refused there).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from shared.tasks import Task, TaskError, load_tasks

DATASETS_DIR = Path(__file__).resolve().parent


class UnknownDataset(TaskError):
    """No bundled dataset of that name."""


class UnknownSplit(TaskError):
    """The dataset has no split of that name."""


EVAL_SPLIT = "eval"
EVAL_SPLIT_SUFFIX = "_eval"


def is_eval_split(split: str | None) -> bool:
    """Whether a split is held out for evaluation (the module docstring); None, the whole dataset, is not one."""
    return split is not None and (split == EVAL_SPLIT or split.endswith(EVAL_SPLIT_SUFFIX))


def available_datasets() -> list[str]:
    return sorted(p.name for p in DATASETS_DIR.iterdir() if (p / "tasks.jsonl").is_file())


def dataset_dir(name: str) -> Path:
    path = DATASETS_DIR / name
    if name not in available_datasets():
        raise UnknownDataset(f"no bundled dataset {name!r}; available: {', '.join(available_datasets())}")
    return path


def dataset_splits(name: str) -> dict[str, list[str]]:
    """Instance ids per split (empty when the dataset names no splits)."""
    path = dataset_dir(name) / "splits.json"
    if not path.is_file():
        return {}
    return {str(k): [str(i) for i in v] for k, v in json.loads(path.read_text()).items()}


def load_dataset(name: str, split: str | None = None) -> list[Task]:
    """The tasks of a bundled dataset (or of one of its splits), with absolute repository paths."""
    tasks = load_tasks(dataset_dir(name) / "tasks.jsonl")
    if split is None:
        return tasks
    splits = dataset_splits(name)
    if split not in splits:
        known = ", ".join(sorted(splits)) or "none"
        raise UnknownSplit(f"dataset {name!r} has no split {split!r} (splits: {known})")
    by_id = {task.instance_id: task for task in tasks}
    return [by_id[i] for i in splits[split]]


def reference_patch(name: str, instance_id: str) -> str:
    """The reference solution of one task (a git diff against its base commit)."""
    path = dataset_dir(name) / "solutions" / f"{instance_id}.patch"
    if not path.is_file():
        raise UnknownDataset(f"dataset {name!r} has no reference solution for {instance_id!r}")
    return path.read_text()


def reference_fix(dataset: str, task: Task) -> str | None:
    """A task's reference fix: its own ``patch`` (SWE-bench's gold patch) or, for a bundled dataset, the
    solution shipped beside it; None when it has neither."""
    if task.patch.strip():
        return task.patch
    if dataset not in available_datasets():
        return None
    try:
        return reference_patch(dataset, task.instance_id) or None
    except UnknownDataset:
        return None


@functools.lru_cache(maxsize=1024)
def reference_files(dataset: str, instance_id: str) -> dict[str, str] | None:
    """The whole text, after the reference fix, of every file the fix changes, for a task of a bundled dataset
    whose repository is a folder of plain files (``swe_micro``, ``swe_mini``); None where that cannot be known
    here (no such dataset or task, a git or store source, a fix that deletes, renames or does not apply). Cached:
    a bundled dataset does not change while a process runs; callers must not change the dict."""
    from shared.tasks import DirSource, PatchApplyError, apply_patch, patch_paths

    try:
        task = _bundled_tasks(dataset).get(instance_id)
        fix = reference_patch(dataset, instance_id)
    except TaskError:
        return None
    if task is None or not isinstance(task.source, DirSource):
        return None
    root = Path(task.source.path)
    before = {p: (root / p).read_text() for p in patch_paths(fix) if (root / p).is_file()}
    try:
        return apply_patch(before, fix)
    except PatchApplyError:
        return None


@functools.lru_cache(maxsize=8)
def _bundled_tasks(dataset: str) -> dict[str, Task]:
    return {task.instance_id: task for task in load_dataset(dataset)}
