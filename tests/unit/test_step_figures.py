"""A run's time figures over its steps (``services/cli/step_figures.py``): windows summed, lag weighted by tokens."""

from __future__ import annotations

import pytest

from services.cli.step_figures import step_figures

pytestmark = pytest.mark.unit


def _row(wall: float, inference: float, learner: float, lag: float, lag_max: int, tokens: float) -> dict:  # type: ignore[type-arg]
    """A step as ``GET /v1/runs/{id}`` returns it (``step_metrics``), its metrics as the learner wrote them."""
    return {
        "step": 1, "policy_version": 1, "policy_lag_mean": lag,
        "metrics": {
            "window_start_unix": 1000.0, "window_end_unix": 1000.0 + wall, "wall_s": wall,
            "inference_busy_s": inference, "inference_busy_fraction": inference / wall, "learner_busy_s": learner,
            "learner_busy_fraction": learner / wall, "policy_lag_max": lag_max, "loss_tokens": tokens,
        },
    }  # fmt: skip


def test_fractions_are_of_the_summed_windows_and_the_lag_is_per_trained_token() -> None:
    figures = step_figures([
        _row(30.0, 12.0, 24.0, 0.0, 0, 60.0),
        _row(20.0, 18.0, 10.0, 0.5, 1, 40.0),
        _row(10.0, 0.0, 1.0, 0.0, 0, 0.0),  # trained nothing: its lag weighs nothing
        {"step": 4, "policy_version": 4, "policy_lag_mean": None, "metrics": {}},  # before the measurement: left out
    ])  # fmt: skip
    assert figures is not None
    assert (figures.steps, figures.wall_s, figures.wall_s_per_step) == (3, 60.0, 20.0)
    assert figures.inference_busy_fraction == pytest.approx(30.0 / 60.0)
    assert figures.learner_busy_fraction == pytest.approx(35.0 / 60.0)
    assert figures.policy_lag_mean == pytest.approx(0.5 * 40.0 / 100.0)
    assert figures.policy_lag_max == 1


def test_no_measured_step_gives_no_figures() -> None:
    assert step_figures([]) is None
    assert (
        step_figures([{"step": 1, "policy_version": 1, "policy_lag_mean": 0.0, "metrics": {"loss": 0.1}}])
        is None
    )
