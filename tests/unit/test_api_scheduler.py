"""Which tasks a step samples: a window walking round the run's task list, never a task twice in one step."""

from __future__ import annotations

import pytest

from services.api.scheduler import step_task_ids

pytestmark = pytest.mark.unit


def test_all_tasks_every_step_by_default() -> None:
    assert (
        step_task_ids(["a", "b", "c"], None, 0) == step_task_ids(["a", "b", "c"], None, 5) == ["a", "b", "c"]
    )


def test_window_walks_round_the_task_list() -> None:
    tasks = ["a", "b", "c", "d", "e"]
    steps = [step_task_ids(tasks, 2, step) for step in range(5)]
    assert steps == [["a", "b"], ["c", "d"], ["e", "a"], ["b", "c"], ["d", "e"]]
    seen = [task for step in steps for task in step]
    assert all(seen.count(task) == 2 for task in tasks)  # every task equally often over a full cycle


def test_more_groups_than_tasks_samples_each_task_once() -> None:
    assert step_task_ids(["a", "b"], 5, 3) == ["a", "b"]
    assert step_task_ids([], 3, 0) == []
