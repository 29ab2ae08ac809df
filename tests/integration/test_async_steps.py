"""Sampling ahead of the learner (bounded staleness, ``grpo.max_policy_lag``) on real Postgres, Redis and S3: the
api's step scheduler (``advance_run``), a real gateway recording calls from the scripted policy, the grader's group
completion and the learner loop, with this test playing the runner (calls through the gateway, then the grade)
and the inference updater (marking a version served and relabelling the policy).

- **No version past the bound**: with lag 1, step k+1 starts while step k is still untrained, never more than one
  version ahead of the newest served version; no trained token is more than one version older than the learner;
  a rollout whose calls span a weight swap records both versions and trains each token against its own
  behaviour logprob; the run's lag (not the service's) is the learner's drop bound.
- **Exact fallback**: with lag 0 or unset, the scheduler waits for the step to be trained and its version
  served, exactly as before.
- Every step row carries its window, busy fractions and the lag of its trained tokens, and a window's inference
  figure is measured again when calls of it are recorded after its commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from sqlalchemy import select, update

from services.api.scheduler import advance_run
from services.grader.group_completion import complete_group_if_done
from services.learner import grpo
from services.learner.loader import load_group
from services.learner.loop import Learner
from services.learner.types import TrainingBatch
from shared.busy_time import GENERATION_NOTE
from shared.db import async_session_factory, async_session_scope, make_async_engine, session_scope
from shared.ids import new_id, new_rollout_key
from shared.models import Call, Chain, Group, Reward, Rollout, Step, Task, Weight
from shared.trajectory import load_segment
from tests.fixtures.gateway import settle_gateways
from tests.fixtures.services import run_row

pytestmark = pytest.mark.integration

SYS = {"role": "system", "content": "You fix bugs."}
TASK = {"role": "user", "content": "Fix the bug."}
BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]


class Steps:
    """One run driven by hand through the real scheduler, gateway, grader completion and learner."""

    def __init__(self, settings, db, redis_client, store, gateway, policy, model_dir, **config: Any) -> None:  # type: ignore[no-untyped-def]
        self.settings, self.db, self.redis, self.store = settings, db, redis_client, store
        self.gateway, self.policy = gateway, policy
        policy.policy_version = 0  # the engine starts every run at the base weights
        self.run_id = new_id("run")
        task_id = f"task_{self.run_id}"
        with session_scope(db) as session:
            session.add(Task(id=task_id, dataset="async-tests", instance_id=task_id, spec={}))
            session.flush()
            row = run_row(
                self.run_id,
                "reference",
                group_size=2,
                task_ids=[task_id],
                groups_per_step=1,
                model_dir=str(model_dir),
                **config,
            )
            row.status = "running"
            session.add(row)
        self.replies: dict[str, dict[str, Any]] = {}

    def advance(self) -> str | None:
        async def go() -> str | None:
            engine = make_async_engine(self.settings.database_url)
            try:
                async with async_session_scope(async_session_factory(engine)) as session:
                    return await advance_run(session, self.run_id)
            finally:
                await engine.dispose()

        return asyncio.run(go())

    def group(self, step: int) -> Group:
        with session_scope(self.db) as session:
            group = session.scalars(
                select(Group).where(Group.run_id == self.run_id, Group.step == step)
            ).one()
            session.expunge(group)
            return group

    def rollouts(self, step: int) -> list[str]:
        with session_scope(self.db) as session:
            return list(
                session.scalars(
                    select(Rollout.id)
                    .join(Group, Group.id == Rollout.group_id)
                    .where(Group.run_id == self.run_id, Group.step == step)
                    .order_by(Rollout.index_in_group)
                )
            )

    def call(self, rollout_id: str) -> None:
        """The harness's next model call: the task first, then the reply's tool call answered (one chain)."""
        with session_scope(self.db) as session:
            rollout = session.get(Rollout, rollout_id)
            assert rollout is not None
            if rollout.rollout_key is None:  # the runner claims it
                rollout.rollout_key, rollout.status = new_rollout_key(), "running"
                rollout.started_at = datetime.now(UTC)
            key = rollout.rollout_key
        messages = [SYS, TASK]
        if rollout_id in self.replies:
            reply = self.replies[rollout_id]
            messages += [
                reply,
                {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": "ok"},
            ]
        response = httpx.post(
            self.gateway.url + "/v1/chat/completions",
            json={"model": "policy", "messages": messages, "tools": TOOLS},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        self.replies[rollout_id] = response.json()["choices"][0]["message"]

    def grade(self, step: int, rewards: list[float]) -> None:
        """The runner's flush barrier (every call recorded), the grader's rewards, then group completion."""
        settle_gateways()
        group = self.group(step)
        with session_scope(self.db) as session:
            for rollout_id, reward in zip(self.rollouts(step), rewards, strict=True):
                rollout = session.get(Rollout, rollout_id)
                assert rollout is not None
                rollout.status, rollout.finished_at = "graded", datetime.now(UTC)
                rollout.outcome = "resolved" if reward == 1.0 else "unresolved"
                session.add(Reward(rollout_id=rollout_id, reward=reward))
        assert complete_group_if_done(self.db, self.redis, group.id) is not None

    def serve(self, version: int) -> None:
        """The inference updater: the engine now samples with ``version`` and its weights row says so."""
        with session_scope(self.db) as session:
            session.execute(
                update(Weight)
                .where(Weight.run_id == self.run_id, Weight.version == version)
                .values(status="served")
            )
        self.policy.policy_version = version

    def calls(self, rollout_id: str) -> list[Call]:
        with session_scope(self.db) as session:
            calls = session.scalars(
                select(Call).join(Chain, Chain.id == Call.chain_id).where(Call.rollout_id == rollout_id)
                .order_by(Chain.id, Call.position)
            ).all()  # fmt: skip
            session.expunge_all()
            return list(calls)

    def steps(self) -> list[Step]:
        with session_scope(self.db) as session:
            rows = session.scalars(select(Step).where(Step.run_id == self.run_id).order_by(Step.step)).all()
            session.expunge_all()
            return list(rows)


@pytest.fixture
def make_steps(
    settings, db, redis_client, store, gateway_server, scripted_policy, tiny_model_dir
) -> Callable[..., Steps]:  # type: ignore[no-untyped-def]
    def make(**config: Any) -> Steps:
        return Steps(
            settings,
            db,
            redis_client,
            store,
            gateway_server,
            scripted_policy.policy,
            tiny_model_dir,
            **config,
        )

    return make


def test_lag_one_samples_ahead_within_the_bound_and_trains_each_token_on_its_own_version(  # type: ignore[no-untyped-def]
    make_steps, settings, db, store
) -> None:
    run = make_steps(steps=4, grpo={"max_policy_lag": 1, "learning_rate": 1e-3})
    assert run.advance() == "step 0 created"
    for rollout_id in run.rollouts(0):
        run.call(rollout_id)
    assert run.advance() is None  # step 0 is still being rolled out
    run.grade(0, [1.0, 0.0])

    # Step 0 is graded but not trained: with lag 1, step 1 starts now, at the served version 0.
    assert run.advance() == "step 1 created at policy version 0"
    assert run.group(0).status == "complete"
    first, second = run.rollouts(1)
    run.call(first)
    run.call(second)  # both sampled by version 0 while the learner has not trained step 0
    learner = Learner(settings, run.run_id, consumer="c1")
    try:
        assert learner.max_policy_lag == 1  # the run's lag is the drop bound, not the service's
        report = learner.step_once(wait_s=5)  # trains step 0 (sampled at version 0) into version 1
        assert report is not None and (report.step, report.policy_version) == (1, 1)
        assert run.advance() is None  # step 1 is still being rolled out

        run.serve(1)  # the swap lands between the first rollout's two calls
        run.call(first)
        run.grade(1, [1.0, 0.0])
        assert (
            run.advance() == "step 2 created at policy version 1"
        )  # version 1 + 1 untrained step - 1 served
        for rollout_id in run.rollouts(2):
            run.call(rollout_id)
        run.grade(2, [0.0, 1.0])
        # Steps 1 and 2 untrained: step 3 would be trained at version 3 from tokens of version 1.
        assert run.advance() is None

        report = learner.step_once(wait_s=5)  # step 1: tokens of versions 0 and 1, the learner at version 1
        assert report is not None and (report.step, report.policy_version) == (2, 2)
        assert run.advance() is None  # version 2 published, not served: still two ahead of the served one
        run.serve(2)
        assert run.advance() == "step 3 created at policy version 2"
        for rollout_id in run.rollouts(3):
            run.call(rollout_id)
        run.grade(3, [1.0, 0.0])
        assert run.advance() is None  # the last step: the run completes only once it is trained and served
        assert learner.step_once(wait_s=5) is not None  # step 2 (version 1) at version 2
        assert learner.step_once(wait_s=5) is not None  # step 3 (version 2) at version 3
    finally:
        learner.close()
    assert run.advance() is None
    run.serve(4)
    assert run.advance() == "completed after step 3"

    # The spanning rollout: one chain, two calls, sampled by versions 0 and 1.
    calls = run.calls(first)
    assert [c.policy_version for c in calls] == [0, 1]
    assert len({c.chain_id for c in calls}) == 1 and [c.position for c in calls] == [0, 1]
    assert [c.policy_version for c in run.calls(second)] == [0]

    # No trained token is more than one version older than the learner that trained it; nothing was dropped.
    steps = run.steps()
    assert [s.step for s in steps] == [1, 2, 3, 4]
    for s in steps:
        learner_version = s.policy_version - 1
        trained = s.metrics["trained_group_ids"]
        assert len(trained) == 1 and s.groups_stale == 0
        with session_scope(db) as session:
            versions = session.scalars(
                select(Call.policy_version).join(Rollout, Rollout.id == Call.rollout_id)
                .where(Rollout.group_id == trained[0])
            ).all()  # fmt: skip
        assert max(learner_version - v for v in versions) <= 1
        assert s.metrics["policy_lag_max"] == max(learner_version - v for v in versions)
    assert [s.metrics["policy_lag_max"] for s in steps] == [0, 1, 1, 1]
    # Step 2 trained the group of step 1: the tokens of both version-0 calls lag by one, those of version 1 by 0.
    sampled = {c.policy_version: 0 for c in calls}
    for c in [*calls, *run.calls(second)]:
        sampled[c.policy_version] += c.completion_tokens
    assert steps[1].policy_lag_mean == pytest.approx(sampled[0] / (sampled[0] + sampled[1]))

    # The loss weighs each token against its own call's behaviour logprob: at logprobs equal to what the inference
    # service recorded for each call, every token's importance ratio is 1, so its gradient is exactly -w * A.
    config = grpo.GRPOConfig(max_policy_lag=1)
    with session_scope(db) as session:
        loaded = load_group(session, store, run.group(1).id, learner_version=1)
    batch = TrainingBatch(grpo.with_advantages(list(loaded.rollouts), config))
    per_token = batch.per_loss_token()
    mine = per_token["rollout_index"] == [r.rollout_id for r in batch.rollouts].index(first)
    segments = [load_segment(store, c.tokens_key) for c in calls]
    np.testing.assert_array_equal(
        per_token["behavior_logprobs"][mine], np.concatenate([s.sampled_logprobs for s in segments])
    )
    np.testing.assert_array_equal(
        per_token["policy_version"][mine],
        np.concatenate([[s.policy_version] * len(s.sampled_ids) for s in segments]),
    )
    assert set(per_token["policy_version"][mine]) == {0, 1}
    objective = grpo.TokenObjective(batch, config, torch.device("cpu"))
    recorded = torch.from_numpy(
        np.concatenate(
            [
                load_segment(store, c.tokens_key).sampled_logprobs
                for r in batch.rollouts
                for c in run.calls(r.rollout_id)
            ]
        ).astype(np.float64)
    ).requires_grad_()
    objective(torch.arange(len(recorded)), recorded).backward()
    weights = grpo.token_weights(batch, config)
    assert recorded.grad is not None
    np.testing.assert_allclose(recorded.grad.numpy(), -weights * per_token["advantage"], rtol=1e-12)
    assert np.any(per_token["advantage"] != 0)

    # Every step's window tiles the run's training time; the busy figures are fractions of it.
    for previous, s in zip(steps, steps[1:], strict=False):
        assert s.metrics["window_start_unix"] == previous.metrics["window_end_unix"]
    for s in steps:
        m = s.metrics
        assert m["wall_s"] == pytest.approx(m["window_end_unix"] - m["window_start_unix"]) and m["wall_s"] > 0
        assert 0 < m["learner_busy_fraction"] <= 1 and 0 <= m["inference_busy_fraction"] <= 1
    # The spanning rollout's second call was sampled between the commits of steps 1 and 2.
    with session_scope(db) as session:
        stamp = session.get(Call, calls[1].id).notes[GENERATION_NOTE]  # type: ignore[union-attr]
    assert steps[0].metrics["window_end_unix"] <= stamp[0] <= stamp[1] <= steps[1].metrics["window_end_unix"]
    assert steps[1].metrics["inference_busy_s"] >= stamp[1] - stamp[0]


def test_lag_zero_or_unset_waits_for_the_step_to_be_trained_and_served(make_steps, settings) -> None:  # type: ignore[no-untyped-def]
    """Exactly the on-policy rule: graded is not enough, trained is not enough, served is."""
    for grpo_config in ({}, {"max_policy_lag": 0}):
        run = make_steps(steps=2, grpo=grpo_config)
        assert run.advance() == "step 0 created"
        for rollout_id in run.rollouts(0):
            run.call(rollout_id)
        run.grade(0, [1.0, 0.0])
        assert run.advance() is None  # graded, not trained
        learner = Learner(settings, run.run_id, consumer="c1")
        try:
            assert learner.max_policy_lag == grpo_config.get("max_policy_lag", settings.max_policy_lag)
            assert learner.step_once(wait_s=5) is not None
        finally:
            learner.close()
        assert run.advance() is None  # trained, version 1 not served
        run.serve(1)
        assert run.advance() == "step 1 created at policy version 1"
        assert run.group(1).policy_version == 1


def test_the_runs_lag_is_the_learners_drop_bound(settings, db, learner_run) -> None:  # type: ignore[no-untyped-def]
    """Lag 1: a group two versions behind the learner is dropped and counted; one version behind is trained."""
    run = learner_run(groups_per_step=1, max_policy_lag=1)
    run.add_group([1.0, 0.0, 0.0, 0.0], seed=1, policy_version=0)
    learner = Learner(settings, run.run_id, consumer="c1")
    try:
        assert learner.step_once(wait_s=5) is not None
        run.add_group([0.0, 1.0, 0.0, 0.0], seed=2, policy_version=0)
        assert learner.step_once(wait_s=5) is not None  # learner at 1, tokens at 0: trained
        stale = run.add_group([0.0, 0.0, 1.0, 0.0], seed=3, policy_version=0)
        report = learner.step_once(wait_s=5)  # learner at 2, tokens at 0: past the bound
    finally:
        learner.close()
    assert report is not None and report.stale_group_ids == (stale,)
    with session_scope(db) as session:
        steps = session.scalars(select(Step).where(Step.run_id == run.run_id).order_by(Step.step)).all()
        assert [(s.groups_trained, s.groups_stale) for s in steps] == [(1, 0), (1, 0), (0, 1)]
        assert [s.metrics["policy_lag_max"] for s in steps] == [0, 1, 0]


def test_a_windows_inference_figure_is_measured_again_when_its_calls_are_recorded_late(  # type: ignore[no-untyped-def]
    settings, db, learner_run
) -> None:
    """With lag 1 a call can still be generating at a commit (its record comes after the reply): the next commit
    measures the previous window again. On-policy nothing generates at a commit, and a window is measured once."""
    for lag in (1, 0):
        run = learner_run(groups_per_step=1, max_policy_lag=lag)
        first = run.add_group([1.0, 0.0, 0.0, 0.0], seed=1)
        learner = Learner(settings, run.run_id, consumer="c1")
        try:
            assert learner.step_once(wait_s=5) is not None
            with session_scope(db) as session:
                window = session.scalars(select(Step).where(Step.run_id == run.run_id)).one().metrics
                assert window["inference_busy_s"] == 0.0  # the fixture's calls carry no generation stamp
                start, end = window["window_start_unix"], window["window_end_unix"]
                # A call generating across the commit of step 1, recorded after it: half of step 1's window.
                call = session.scalars(
                    select(Call).join(Rollout, Rollout.id == Call.rollout_id).where(Rollout.group_id == first)
                ).first()
                assert call is not None
                half = (end - start) / 2
                call.notes = {GENERATION_NOTE: [end - half, end + 1.0]}
            run.add_group([0.0, 1.0, 0.0, 0.0], seed=2, policy_version=1)
            assert learner.step_once(wait_s=5) is not None
        finally:
            learner.close()
        with session_scope(db) as session:
            steps = session.scalars(select(Step).where(Step.run_id == run.run_id).order_by(Step.step)).all()
            assert steps[0].metrics["window_start_unix"] == start
            assert steps[1].metrics["window_start_unix"] == end
            second = steps[1].metrics
            assert second["inference_busy_s"] == pytest.approx(min(1.0, second["window_end_unix"] - end))
            if lag:
                assert steps[0].metrics["inference_busy_s"] == pytest.approx(half)
                assert steps[0].metrics["inference_busy_fraction"] == pytest.approx(0.5)
            else:
                assert steps[0].metrics["inference_busy_s"] == 0.0
