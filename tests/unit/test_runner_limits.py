"""Which wall clock a rollout gets: the run's limit (never above the service's), else the task's, else the
service's; and every sandbox kill reason maps to the ``limit:<name>`` its row records."""

from __future__ import annotations

import pytest

from services.runner.outcome import SANDBOX_LIMITS, AttemptFacts, classify_attempt
from services.runner.rollout import rollout_timeout_s
from shared.run_config import LimitsConfig
from shared.settings import Settings
from shared.statuses import Outcome
from shared.tasks import Task

pytestmark = pytest.mark.unit

TASK = Task(
    instance_id="t-1",
    repo="example/t",
    source={"kind": "dir", "path": "/nonexistent"},
    base_commit="0123456789abcdef0123456789abcdef01234567",
    problem_statement="Fix it.",
    FAIL_TO_PASS=["tests/test_t.py::test_a"],
)


def test_wall_clock_precedence_and_cap() -> None:
    settings = Settings(rollout_timeout_s=600.0, _env_file=None)  # type: ignore[call-arg]
    slow_task = TASK.model_copy(update={"agent_timeout_s": 120.0})
    assert rollout_timeout_s(settings, LimitsConfig(), TASK) == 600.0
    assert rollout_timeout_s(settings, LimitsConfig(), slow_task) == 120.0
    assert rollout_timeout_s(settings, LimitsConfig(wall_clock_s=5.0), slow_task) == 5.0
    assert rollout_timeout_s(settings, LimitsConfig(wall_clock_s=3600.0), TASK) == 600.0


@pytest.mark.parametrize("killed", sorted(SANDBOX_LIMITS))
def test_every_kill_reason_is_a_named_limit(killed: str) -> None:
    verdict = classify_attempt(AttemptFacts("harness_error", "killed", killed, calls=2))
    assert verdict.outcome == Outcome.LIMIT and verdict.reason == f"limit:{SANDBOX_LIMITS[killed]}"
    assert verdict.graded  # it made model calls
