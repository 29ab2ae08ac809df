"""Where a run's scheduled evals are shown: the terminal chart and table of ``run status``/``watch`` and the
run's PNG (the eval points drawn with their intervals beside the training reward)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from services.api.plot import reward_curve_png
from services.api.schemas import RunDetail
from services.cli.run import _eval_curve, _watch_view

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 1, tzinfo=UTC).isoformat()


def detail() -> dict[str, Any]:
    point = {"status": "completed", "samples": 8, "pass_at_1_low": 0.1, "pass_at_1_high": 0.6}
    return {
        "id": "run_a", "name": "a", "kind": "train", "status": "running", "model": "policy", "harness": "codeblock",
        "group_size": 2, "steps": 4, "current_step": 3, "steps_done": 3, "policy_version": 3, "error": None,
        "config_error": None, "created_at": NOW, "updated_at": NOW, "config": None,
        "progress": {"tasks": 2, "groups": {}, "rollouts": {"graded": 12}, "rollouts_total": 12, "rollouts_done": 12,
                     "steps_done": 3},
        "step_metrics": [],
        "reward_curve": [{"step": s, "rollouts": 4, "reward_mean": 0.1 * s, "reward_std": 0.1, "reward_min": 0.0,
                          "reward_max": 1.0, "resolved_rate": 0.1 * s} for s in range(4)],
        "eval_curve": [
            {"eval_id": "eval_0", "at_step": 0, "version": 0, "pass_at_1": 0.25, **point},
            {"eval_id": "eval_2", "at_step": 2, "version": 2, "pass_at_1": 0.375, **point},
            {"eval_id": "eval_4", "at_step": 4, "version": 4, "pass_at_1": None, **point, "status": "running"},
        ],
    }  # fmt: skip


def test_watch_shows_the_eval_curve_and_table() -> None:
    run = detail()
    assert _eval_curve(run) == [0.25, None, 0.375, None, None]
    console = Console(file=io.StringIO(), width=200)
    console.print(_watch_view(run, console.width))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "eval pass@1 (config.eval) by step" in text
    assert "0.375" in text and "0.100-0.600" in text and "eval_2" in text and "running" in text


def test_the_png_draws_the_eval_points() -> None:
    run = RunDetail.model_validate(detail())
    with_evals = reward_curve_png(run)
    without = reward_curve_png(run.model_copy(update={"eval_curve": []}))
    assert with_evals.startswith(b"\x89PNG") and with_evals != without
