"""A run's time figures over its learner steps, from the ``steps`` rows' metrics (``services/learner/loop.py:
Learner._measure`` defines each step's window and what counts as busy): used by ``harnessrl run status`` and
``harnessrl bench learning``.

The steps' windows tile the run's training time, from its first sampling to its last commit, so the sums below
are the same figures over that whole span.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any


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


def step_figures(rows: Iterable[Mapping[str, Any]]) -> StepFigures | None:
    """``rows``: steps as the api returns them (``policy_lag_mean`` and ``metrics`` of each); None when none of
    them carries a window."""
    timed = [r for r in rows if "wall_s" in (r.get("metrics") or {})]
    if not timed:
        return None
    wall = sum(r["metrics"]["wall_s"] for r in timed)
    tokens = sum(r["metrics"].get("loss_tokens", 0.0) for r in timed)
    lagged = sum((r.get("policy_lag_mean") or 0.0) * r["metrics"].get("loss_tokens", 0.0) for r in timed)
    share = max(wall, 1e-9)
    return StepFigures(
        steps=len(timed),
        wall_s=wall,
        wall_s_per_step=wall / len(timed),
        inference_busy_fraction=sum(r["metrics"]["inference_busy_s"] for r in timed) / share,
        learner_busy_fraction=sum(r["metrics"]["learner_busy_s"] for r in timed) / share,
        policy_lag_mean=lagged / tokens if tokens else 0.0,
        policy_lag_max=max(int(r["metrics"].get("policy_lag_max", 0)) for r in timed),
    )
