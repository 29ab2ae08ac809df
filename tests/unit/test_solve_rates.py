"""Solve-rates files (``shared/solve_rates.py``) and the learning recipe's curriculum that reads them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click
import pytest

from benchmarks.recipe import BASE_SOLVE_RATES, RECIPE, curriculum_tasks
from shared.datasets import dataset_splits
from shared.solve_rates import SolveRates, SolveRatesError

SAMPLING = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 200}


def rates(tasks: dict[str, tuple[int, int]], **changes: object) -> SolveRates:
    base = SolveRates("swe_micro", "codeblock", "base", 8, SAMPLING, tasks, [])
    return replace(base, **changes)  # type: ignore[arg-type]


def test_round_trip_one_line_per_task(tmp_path: Path) -> None:
    original = rates({"b-1": (0, 8), "a-1": (3, 8)})
    path = tmp_path / "r.json"
    original.write(path)
    assert SolveRates.read(path) == original
    assert '  "a-1": [3, 8],\n  "b-1": [0, 8]\n' in path.read_text()


def test_merge_refuses_other_measurements_and_tasks_measured_twice() -> None:
    one = rates({"a-1": (1, 8)})
    assert one.merged(rates({"b-1": (2, 8)})).tasks == {"a-1": (1, 8), "b-1": (2, 8)}
    with pytest.raises(SolveRatesError, match="sampling"):
        one.merged(rates({"b-1": (2, 8)}, sampling={**SAMPLING, "temperature": 1.0}))
    with pytest.raises(SolveRatesError, match="samples_per_task"):
        one.merged(rates({"b-1": (2, 4)}, samples_per_task=4))
    with pytest.raises(SolveRatesError, match="measured twice"):
        one.merged(rates({"a-1": (0, 8)}))


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"dataset": "d"}, "not a solve-rates document"),
        ({**rates({}).as_json(), "tasks": {"a-1": [9, 8]}}, "passed must lie in 0..samples"),
        ({**rates({}).as_json(), "tasks": {"a-1": [0, 0]}}, "samples be positive"),
        ({**rates({}).as_json(), "tasks": {"a-1": "x"}}, "not a solve-rates document"),
    ],
)
def test_bad_documents_are_refused(tmp_path: Path, document: dict[str, object], says: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SolveRatesError, match=says):
        SolveRates.read(path)


def test_band_is_inclusive_and_needs_every_task_measured() -> None:
    r = rates({"a-1": (1, 8), "a-2": (0, 8), "a-3": (4, 8), "a-4": (5, 8)})
    assert r.in_band(["a-4", "a-3", "a-2", "a-1"], 0.125, 0.5) == ["a-3", "a-1"]
    with pytest.raises(SolveRatesError, match="no solve rate for 1 of 2 tasks"):
        r.in_band(["a-1", "z-1"], 0.0, 1.0)


def test_curriculum_picks_the_band_and_refuses_too_few_tasks(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    rates({"a-1": (1, 8), "a-2": (0, 8), "a-3": (4, 8), "a-4": (5, 8), "a-5": (2, 8)}).write(path)
    ids = ["a-1", "a-2", "a-3", "a-4", "a-5"]
    assert curriculum_tasks(replace(RECIPE, curriculum=None), ids) == ids  # no curriculum: every task
    recipe = replace(RECIPE, curriculum=(0.1, 0.5), solve_rates=str(path), groups_per_step=3)
    assert curriculum_tasks(recipe, ids) == ["a-1", "a-3", "a-5"]
    with pytest.raises(click.ClickException, match=r"2 train tasks .* fewer than the 3 groups"):
        curriculum_tasks(replace(recipe, curriculum=(0.2, 0.5)), ids)
    rates({"a-1": (1, 8)}, harness="codex").write(path)
    with pytest.raises(click.ClickException, match="codex"):
        curriculum_tasks(recipe, ids)


def test_the_bundled_base_rates_cover_both_splits_of_swe_micro() -> None:
    bundled = SolveRates.read(BASE_SOLVE_RATES)
    splits = dataset_splits("swe_micro")
    assert set(bundled.tasks) == set(splits["train"]) | set(splits["eval"])
    assert (bundled.policy, bundled.harness, bundled.samples_per_task) == ("base", "codeblock", 8)
    assert bundled.sampling == {
        "temperature": RECIPE.temperature,
        "top_p": 1.0,
        "max_tokens": RECIPE.max_tokens,
    }
