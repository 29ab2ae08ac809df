"""What the api refuses of a run's or eval's teacher (``shared/run_config.py: TeacherConfig``), before anything
is written.

``--teacher reference`` shows a policy each task's reference fix, so it is refused (``Invalid``, a 422 naming
``body.teacher``) on an eval split (``shared/datasets: is_eval_split``) and on a task without a reference fix
(``shared/datasets: reference_fix``). Tasks taken from a bundled dataset without naming a split (the whole dataset,
or instance ids of it) are refused when any of its eval splits holds them: a dataset may have several split schemes
(``swe_micro``: ``train``/``eval`` and ``seen_train``/``seen_eval``, which overlap), and only a named train split
says which scheme the demonstrations are for. ``--teacher URL`` is checked by its model (scheme, host, no
credentials in the URL); its key is the gateway's environment's, never the request's. Called by ``runs.create_run``,
``runs.add_tasks`` and ``evals.create_eval`` after they resolved the tasks and before they upsert them.
"""

from __future__ import annotations

from services.api.errors import Invalid
from shared.datasets import available_datasets, dataset_splits, is_eval_split, reference_fix
from shared.run_config import TEACHER_REFERENCE, TeacherConfig
from shared.tasks import Task

FIELD = "body.teacher"
NAMED = 10
"""Tasks an error names at most."""


def held_out(dataset: str) -> set[str]:
    """Instance ids a bundled dataset holds out in its eval splits (none for any other label)."""
    if dataset not in available_datasets():
        return set()
    return {i for split, ids in dataset_splits(dataset).items() if is_eval_split(split) for i in ids}


def check_teacher(teacher: TeacherConfig | None, dataset: str, split: str | None, tasks: list[Task]) -> None:
    """Refuse (``Invalid``) a reference teacher on eval tasks or on tasks without a reference fix."""
    if teacher is None or teacher.kind != TEACHER_REFERENCE:
        return
    if is_eval_split(split):
        raise Invalid.field(
            FIELD,
            f"--teacher reference is refused on eval split {split!r} of {dataset!r}: it would show the policy the "
            "reference fixes of held-out tasks; use a train split",
        )
    evaluated = held_out(dataset) if split is None else set()
    if leaking := [t.instance_id for t in tasks if t.instance_id in evaluated]:
        raise Invalid.field(
            FIELD,
            f"--teacher reference is refused on tasks of an eval split of {dataset!r} ({len(leaking)}: "
            f"{', '.join(leaking[:NAMED])}); name a train split (--split)",
        )
    if missing := [t.instance_id for t in tasks if reference_fix(dataset, t) is None]:
        raise Invalid.field(
            FIELD,
            f"--teacher reference needs a reference fix for every task; {len(missing)} have none "
            f"({', '.join(missing[:NAMED])}): give each task its 'patch', or use --teacher URL",
        )
