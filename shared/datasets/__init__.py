"""Bundled task suites (``shared/datasets/<name>/``) and how to read them.

A dataset folder holds ``tasks.jsonl`` (loadable with ``shared.tasks.load_tasks``), the repositories its tasks
come from (``repos/``, plain files committed deterministically, see ``shared.tasks``), and the reference
solutions (``solutions/<instance_id>.patch``). Solutions exist to test the suite and the grader; nothing hands
them to an agent. ``tasks.jsonl`` and ``solutions/`` are generated from ``cases/`` by ``shared.datasets.build``.
"""

from __future__ import annotations

from pathlib import Path

from shared.tasks import Task, TaskError, load_tasks

DATASETS_DIR = Path(__file__).resolve().parent


class UnknownDataset(TaskError):
    """No bundled dataset of that name."""


def available_datasets() -> list[str]:
    return sorted(p.name for p in DATASETS_DIR.iterdir() if (p / "tasks.jsonl").is_file())


def dataset_dir(name: str) -> Path:
    path = DATASETS_DIR / name
    if name not in available_datasets():
        raise UnknownDataset(f"no bundled dataset {name!r}; available: {', '.join(available_datasets())}")
    return path


def load_dataset(name: str) -> list[Task]:
    """The tasks of a bundled dataset, with absolute repository paths."""
    return load_tasks(dataset_dir(name) / "tasks.jsonl")


def reference_patch(name: str, instance_id: str) -> str:
    """The reference solution of one task (a git diff against its base commit)."""
    path = dataset_dir(name) / "solutions" / f"{instance_id}.patch"
    if not path.is_file():
        raise UnknownDataset(f"dataset {name!r} has no reference solution for {instance_id!r}")
    return path.read_text()
