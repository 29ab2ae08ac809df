"""The red-team suite's harness: an attack is a shell-harness rollout whose command is the attack, run by the real
runner in the real sandbox, then graded by the real grader. ``attack(task, script)`` returns what it left on the
rollout and its reward (``AttackResult``); each test asserts no host effect, the reward and the recorded reason.

A rollout that made no model call is not graded (the harness bypassed the gateway), so the attack's command first
makes one chat call through the gateway (``MODEL_CALL``: the real gateway of ``tests/e2e/conftest.py`` in front of
the scripted policy), then does its work; what it wants to show the test it writes into the workspace, where the
stored patch carries it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from services.grader.grade import GradeOutcome, grade_rollout
from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.models import Reward, Rollout
from shared.tasks import Task
from tests.e2e.conftest import dead_upstream_gateway, scripted_gateway  # noqa: F401 - fixtures used here

pytestmark = [pytest.mark.e2e]

# One chat call through the gateway, as any harness makes; its reply is discarded. ``$HARNESSRL_ATTACK_BASE_URL``
# is the rollout's OpenAI base URL (``.../v1``).
MODEL_CALL = (
    'python3 -c "import json, os, urllib.request; '
    "body = json.dumps({'model': 'policy', 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 4}); "
    "req = urllib.request.Request(os.environ['HARNESSRL_ATTACK_BASE_URL'] + '/chat/completions', body.encode(), "
    "{'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']}); "
    'urllib.request.urlopen(req, timeout=60).read()" >/dev/null 2>&1'
)


@dataclass(frozen=True)
class AttackResult:
    """The rollout row after the attack ran and was graded (``reward`` None: no reward row was written)."""

    rollout_id: str
    status: str
    outcome: str | None
    outcome_reason: str | None
    error: str | None
    patch: bytes | None
    meta: dict[str, Any]
    reward: float | None
    reward_row: dict[str, Any] | None
    grading: GradeOutcome | None


@pytest.fixture
def attack(
    scripted_gateway,  # noqa: F811 - the fixture imported above
    scripted_policy,
    sandbox,
    db,
    store,
    redis_client,
    make_rollouts,
) -> Callable[..., AttackResult]:  # type: ignore[no-untyped-def]
    """``attack(task, script, grade=True, **run_config) -> AttackResult``: run ``script`` (sh, after one model call)
    as the shell harness of a one-rollout run of ``task`` (no retries), then grade it as the grader's task would."""

    def run(task: Task, script: str, *, grade: bool = True, **config: Any) -> AttackResult:
        settings = scripted_gateway.settings.model_copy(update={"rollout_retries": 0})
        harness = {
            "name": "shell",
            "command": f"{MODEL_CALL}\n{script}\n# {{instruction}}",
            "env": {"HARNESSRL_ATTACK_BASE_URL": "{base_url}"},
        }
        _, _, [rollout_id] = make_rollouts(task, harness, **config)
        attempt = claim(settings, db, store, rollout_id)
        assert isinstance(attempt, Attempt), attempt
        execute_attempt(settings, db, store, sandbox, attempt)
        grading = None
        if grade:
            grading = grade_rollout(
                rollout_id, db=db, store=store, sandbox=sandbox, redis_client=redis_client, timeout_s=120,
                max_attempts=1,
            )  # fmt: skip
        with session_scope(db) as session:
            row = session.get(Rollout, rollout_id)
            assert row is not None
            reward = session.query(Reward).filter_by(rollout_id=rollout_id).one_or_none()
            patch = store.get_bytes(row.patch_key) if row.patch_key else None
            return AttackResult(
                rollout_id=rollout_id,
                status=row.status,
                outcome=row.outcome,
                outcome_reason=row.outcome_reason,
                error=row.error,
                patch=patch,
                meta=dict(row.meta),
                reward=reward.reward if reward is not None else None,
                reward_row={c.name: getattr(reward, c.name) for c in Reward.__table__.columns}
                if reward
                else None,
                grading=grading,
            )

    return run
