"""Turn a request's task source (bundled dataset name, JSONL file on the api host, inline tasks) into tasks.

Bundled datasets are read through ``shared.datasets`` (``swe_mini`` ships with the project). Every
problem becomes an ``Invalid`` error whose ``loc`` names the request field, so the client sees a 422 that says
which field to fix, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from services.api.errors import Invalid
from services.api.schemas import TaskSource
from shared.datasets import UnknownSplit, available_datasets, load_dataset
from shared.tasks import Task, TaskError, load_tasks


def _load(path: Path, loc: str) -> list[Task]:
    try:
        return load_tasks(path)
    except TaskError as exc:
        raise Invalid.field(loc, str(exc)) from None


def resolve_tasks(source: TaskSource) -> tuple[str, list[Task]]:
    """The dataset label (what tasks are upserted under) and the selected tasks, in request order."""
    if source.tasks is not None:
        label, tasks = source.dataset or "inline", list(source.tasks)
    elif source.dataset_file is not None:
        path = Path(source.dataset_file)
        if not path.is_absolute():
            raise Invalid.field("body.dataset_file", "must be an absolute path on the api host")
        label, tasks = source.dataset or path.stem, _load(path, "body.dataset_file")
    else:
        assert source.dataset is not None  # TaskSource guarantees one source
        if source.dataset not in available_datasets():
            known = ", ".join(available_datasets()) or "none installed"
            raise Invalid.field("body.dataset", f"unknown dataset {source.dataset!r} (bundled: {known})")
        try:
            label, tasks = source.dataset, load_dataset(source.dataset, source.split)
        except UnknownSplit as exc:
            raise Invalid.field("body.split", str(exc)) from None
        except TaskError as exc:
            raise Invalid.field("body.dataset", str(exc)) from None

    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.instance_id in seen:
            raise Invalid.field(
                f"body.tasks.{index}.instance_id", f"duplicate instance_id {task.instance_id!r}"
            )
        seen.add(task.instance_id)

    if source.instance_ids is not None:
        by_id = {task.instance_id: task for task in tasks}
        missing = [i for i in source.instance_ids if i not in by_id]
        if missing:
            raise Invalid.field("body.instance_ids", f"not in dataset {label!r}: {', '.join(missing[:10])}")
        tasks = [by_id[i] for i in dict.fromkeys(source.instance_ids)]
    if not tasks:
        raise Invalid.field("body.dataset_file", "the task file holds no tasks")
    return label, tasks
