"""A run's time figures over its learner steps, from the steps' ``StepRecord``s (``shared/step_record.py``;
``services/learner/timing.py`` defines each step's window and what counts as busy): used by ``harnessrl run
status`` and ``harnessrl bench learning``, which read the steps through the api (``GET /v1/runs/{id}``).

The steps' windows tile the run's training time, from its first sampling to its last commit, so the sums below
are the same figures over that whole span.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from shared.step_record import StepRecord


@dataclass(frozen=True)
class StepFigures:
    steps: int
    """Steps whose rows carry a window (rows written before the measurement are left out)."""
    wall_s: float
    wall_s_per_step: float
    inference_busy_fraction: float
    """Time with at least one of the run's calls in generation / wall time."""
    learner_busy_fraction: float
    """Time the learner spent in its updates, publishing and commits / wall time."""
    policy_lag_mean: float
    """Versions between the learner and the version that sampled each trained token, averaged over the tokens."""
    policy_lag_max: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_records(rows: Iterable[Mapping[str, Any] | StepRecord]) -> list[StepRecord]:
    """Steps as the api returns them (``step_metrics`` of ``GET /v1/runs/{id}``), as records."""
    return [r if isinstance(r, StepRecord) else StepRecord.from_row(r) for r in rows]


def step_figures(rows: Iterable[Mapping[str, Any] | StepRecord]) -> StepFigures | None:
    """``rows``: steps as the api returns them, or their records; None when none of them carries a window."""
    timed = [(r, r.window) for r in step_records(rows) if r.window is not None]
    if not timed:
        return None
    wall = sum(w.wall_s for _, w in timed)
    tokens = sum(r.update.loss_tokens for r, _ in timed)
    lagged = sum((r.policy_lag_mean or 0.0) * r.update.loss_tokens for r, _ in timed)
    share = max(wall, 1e-9)
    return StepFigures(
        steps=len(timed),
        wall_s=wall,
        wall_s_per_step=wall / len(timed),
        inference_busy_fraction=sum(w.inference_busy_s for _, w in timed) / share,
        learner_busy_fraction=sum(w.learner_busy_s for _, w in timed) / share,
        policy_lag_mean=lagged / tokens if tokens else 0.0,
        policy_lag_max=max(r.policy_lag_max for r, _ in timed),
    )
