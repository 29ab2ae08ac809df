"""Turn a request's task source (bundled dataset name, JSONL file on the api host, inline tasks) into tasks.

Bundled datasets are read through ``shared.datasets`` (``swe_mini`` ships with the project). Every
problem becomes an ``Invalid`` error whose ``loc`` names the request field, so the client sees a 422 that says
which field to fix, and nothing is written.

A REST client holds a token, not the host: the task file it names and every host path its tasks name (a ``dir``
source, a local git repository) must lie under the operator's ``task_dir_allowlist`` (empty by default: refused),
and a git URL must be one ``shared/tasks.py: git_url_refusal`` accepts. Bundled datasets are the project's own.
The runner still copies only what the sandbox user could read (``shared/host_paths.py: copy_readable_tree``).
"""

from __future__ import annotations

from pathlib import Path

from services.api.errors import Invalid
from services.api.schemas import TaskSource
from shared.datasets import UnknownSplit, available_datasets, load_dataset
from shared.host_paths import allowlist_refusal
from shared.settings import Settings, get_settings
from shared.tasks import GitSource, Task, TaskError, git_url_refusal, load_tasks, source_host_path


def _load(path: Path, loc: str) -> list[Task]:
    try:
        return load_tasks(path)
    except TaskError as exc:
        raise Invalid.field(loc, str(exc)) from None


def check_client_sources(tasks: list[Task], settings: Settings, loc_of: str | None = None) -> None:
    """Refuse (``Invalid``) a task a REST client sent whose source reads a host path outside the allow-list or
    names a refused git URL. ``loc_of``: the field every error names (a task file); else ``body.tasks.<i>...``."""
    for index, task in enumerate(tasks):
        field = "url" if isinstance(task.source, GitSource) else "path"
        loc = loc_of or f"body.tasks.{index}.source.{field}"
        prefix = f"task {task.instance_id}: " if loc_of else ""
        if isinstance(task.source, GitSource) and (why := git_url_refusal(task.source.url)):
            raise Invalid.field(loc, prefix + why)
        path = source_host_path(task.source)
        if path is not None and (why := allowlist_refusal(path, settings)):
            raise Invalid.field(loc, prefix + why)


def resolve_tasks(source: TaskSource, settings: Settings | None = None) -> tuple[str, list[Task]]:
    """The dataset label (what tasks are upserted under) and the selected tasks, in request order. ``settings``:
    the api's (None: the process's, ``get_settings``), for the host-path allow-list."""
    if source.tasks is not None:
        label, tasks = source.dataset or "inline", list(source.tasks)
        check_client_sources(tasks, settings or get_settings())
    elif source.dataset_file is not None:
        path = Path(source.dataset_file)
        if not path.is_absolute():
            raise Invalid.field("body.dataset_file", "must be an absolute path on the api host")
        if why := allowlist_refusal(source.dataset_file, settings or get_settings()):
            raise Invalid.field("body.dataset_file", why)
        label, tasks = source.dataset or path.stem, _load(path, "body.dataset_file")
        check_client_sources(tasks, settings or get_settings(), "body.dataset_file")
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
