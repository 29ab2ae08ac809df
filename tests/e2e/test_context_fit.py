"""A harness whose first prompt does not fit the model (issue 16): Claude Code, sandboxed, against a real gateway
that serves the tiny model's context length (4096 tokens; Claude Code's first call is ~17.6k of its tokens).
The gateway refuses the prompt in Anthropic's shape and records both numbers; the rollout ends ``failed`` with
outcome ``harness_error``, reason ``context``, and the prompt's size and the context length in its error and
``meta['context']``. Nothing was sampled, and the scheduler fails the run with that reason and both numbers."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update

from services.api.scheduler import advance_run
from services.runner.rollout import Attempt, claim, execute_attempt
from shared.context_fit import first_prompt_tokens, model_context_length
from shared.db import async_session_factory, make_async_engine, session_scope
from shared.models import Group, Rollout, Run
from shared.statuses import GroupStatus, Outcome, RolloutStatus, RunStatus
from tests.e2e.conftest import start_gateway
from tests.fixtures.services import stop_process

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def tiny_context_gateway(settings, settings_env, tiny_model_dir, data_dir, scripted_policy_server):  # type: ignore[no-untyped-def]
    context = model_context_length(tiny_model_dir, 131072)
    gateway = start_gateway(
        settings, settings_env, scripted_policy_server.url, tiny_model_dir, data_dir, max_model_len=context
    )
    yield gateway
    stop_process(gateway.proc)


def test_claude_code_on_the_tiny_model_ends_with_reason_context_and_both_numbers(  # type: ignore[no-untyped-def]
    tiny_context_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts, tiny_model_dir
):
    settings = tiny_context_gateway.settings
    run_id, group_id, [rollout_id] = make_rollouts(toy_task, "claude-code")
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    execute_attempt(settings, db, store, sandbox, attempt)

    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stderr = store.get_bytes(f"{rollout.logs_key}/harness.stderr").decode()[-1500:]
        detail = f"{rollout.outcome} {rollout.outcome_reason} {rollout.error}\nstderr: {stderr}"
        assert rollout.status == RolloutStatus.FAILED, detail  # no call was answered: nothing to grade
        assert (rollout.outcome, rollout.outcome_reason) == (Outcome.HARNESS_ERROR, "context"), detail
        numbers = rollout.meta["context"]
        error = rollout.error or ""
    expected = first_prompt_tokens("claude-code", tiny_model_dir, toy_task.problem_statement)
    assert numbers["context_length"] == 4096
    assert abs(numbers["prompt_tokens"] - expected) <= 0.03 * expected, (numbers, expected)
    assert f"{numbers['prompt_tokens']} tokens" in error and "4096" in error, error
    assert scripted_policy.requests == []  # refused before sampling

    # The run's status says so: once the learner is done with the step (it consumes the group; nothing in it is
    # trainable), the scheduler's own transition fails the run with the reason and both numbers.
    with session_scope(db) as session:
        session.execute(update(Group).where(Group.id == group_id).values(status=GroupStatus.CONSUMED))
        session.execute(
            update(Run).where(Run.id == run_id).values(status=RunStatus.RUNNING)
        )  # as the api makes it
    status, run_error = run_status_after_advance(settings.database_url, run_id)
    assert status == RunStatus.FAILED, run_error
    assert "every rollout of step 0 failed (1 harness_error); first: context:" in run_error, run_error
    assert f"{numbers['prompt_tokens']} tokens" in run_error and "4096" in run_error, run_error


def run_status_after_advance(database_url: str, run_id: str) -> tuple[str, str]:
    """One scheduler transition of the run (``advance_run``, committed), then its status and error."""

    async def advance() -> tuple[str, str]:
        engine = make_async_engine(database_url)
        try:
            async with async_session_factory(engine)() as session, session.begin():
                await advance_run(session, run_id)
            async with async_session_factory(engine)() as session:
                run = await session.get(Run, run_id)
                assert run is not None
                return run.status, run.error or ""
        finally:
            await engine.dispose()

    return asyncio.run(advance())
