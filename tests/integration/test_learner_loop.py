"""The learner process against real Postgres, Redis and S3: steps, publishing, drops, set-asides, exact resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load
from sqlalchemy import select

from services.learner.loop import Learner, LearnerError
from shared.db import session_scope
from shared.events import GROUPS_CONSUMER_GROUP, groups_stream, weights_channel
from shared.models import Group, Rollout, Run, Step, Weight

pytestmark = pytest.mark.integration


def _pending(redis_client, run_id: str) -> int:  # type: ignore[no-untyped-def]
    return int(redis_client.xpending(groups_stream(run_id), GROUPS_CONSUMER_GROUP)["pending"])


def _step_once(settings, run_id: str):  # type: ignore[no-untyped-def]
    """One learner step of run ``run_id`` by a fresh learner, closed afterwards; its report."""
    learner = Learner(settings, run_id, consumer="c1")
    try:
        return learner.step_once(wait_s=5)
    finally:
        learner.close()


def test_step_trains_publishes_and_sets_aside_bad_groups(  # type: ignore[no-untyped-def]
    settings, db, store, redis_client, learner_run, tiny_model_dir
) -> None:
    run = learner_run(groups_per_step=5)  # one sampling step of five groups: 2 good, 1 flat, 2 corrupt
    flat = run.add_group([1.0, 1.0, 1.0, 1.0], seed=3)
    missing = run.add_group([1.0, 0.0, 0.0, 0.0], seed=4, corrupt="missing")
    lengths = run.add_group([1.0, 0.0, 0.0, 0.0], seed=5, corrupt="lengths")
    good = [run.add_group([1.0, 0.0, 0.5, 0.0], seed=1), run.add_group([0.0, 1.0, 1.0, 0.0], seed=2)]
    pubsub = redis_client.pubsub()
    pubsub.subscribe(weights_channel(redis_client))
    report = _step_once(settings, run.run_id)
    assert report is not None and report.step == 1 and report.policy_version == 1
    with session_scope(db) as session:
        step = session.scalars(select(Step).where(Step.run_id == run.run_id)).one()
        assert step.groups_trained == 2
        assert step.groups_zero_variance == 1
        assert step.groups_set_aside == 2
        assert step.tokens > 0 and step.loss is not None and step.step_time_s > 0
        assert step.clip_fraction is not None and step.kl is not None and step.reward_std > 0
        reasons = {item["group_id"]: item["reason"] for item in step.metrics["set_aside"]}
        assert "missing" in reasons[missing]
        assert "row says" in reasons[lengths]
        # Reading the groups is timed: all of it, and the part that delayed the update (the last group's).
        assert 0 < step.metrics["load_last_group_s"] <= step.metrics["load_s"]
        statuses = {g.id: g.status for g in session.scalars(select(Group).where(Group.run_id == run.run_id))}
        assert statuses == {
            good[0]: "consumed",
            good[1]: "consumed",
            flat: "consumed",
            missing: "failed",
            lengths: "failed",
        }
        aside = session.scalars(select(Rollout).where(Rollout.group_id == missing)).all()
        assert all("missing" in r.meta["learner_set_aside"] for r in aside)
        weight = session.scalars(select(Weight).where(Weight.run_id == run.run_id)).one()
        assert (weight.version, weight.status) == (1, "published")
        assert session.get(Run, run.run_id).policy_version == 1
    # The published blob has exactly the served model's tensor names, and differs from the base weights.
    published = load(store.get_bytes(weight.object_key))
    base = load((tiny_model_dir / "model.safetensors").read_bytes())
    assert published.keys() == base.keys()
    assert any(not (published[k] == base[k]).all() for k in base)
    assert _pending(redis_client, run.run_id) == 0
    deadline = time.monotonic() + 5
    message = None
    while message is None and time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
    pubsub.close()
    assert message is not None
    assert json.loads(message["data"]) == {
        "run_id": run.run_id,
        "version": 1,
        "object_key": weight.object_key,
    }


def test_a_group_with_an_infrastructure_failure_is_set_aside_never_scored(  # type: ignore[no-untyped-def]
    settings, db, learner_run
) -> None:
    """Three rewarded rollouts would still make a GRPO baseline, but what the group scored partly measures the
    infrastructure: the whole group is set aside with the reason, and nothing of it is trained."""
    run = learner_run(groups_per_step=2)
    good = run.add_group([1.0, 0.0, 0.5, 0.0], seed=1)
    broken = run.add_group([1.0, 0.0, 0.0, 0.0], seed=2, corrupt="infrastructure")
    report = _step_once(settings, run.run_id)
    assert report is not None
    with session_scope(db) as session:
        step = session.scalars(select(Step).where(Step.run_id == run.run_id)).one()
        assert (step.groups_trained, step.groups_set_aside) == (1, 1)
        [aside] = step.metrics["set_aside"]
        assert (
            aside["group_id"] == broken and "infrastructure_error (inference_unavailable)" in aside["reason"]
        )
        group = session.get(Group, broken)
        assert group.status == "failed" and "infrastructure_error" in (group.error or "")
        assert session.get(Group, good).status == "consumed"


def test_stale_groups_are_dropped_and_redelivered_groups_not_retrained(  # type: ignore[no-untyped-def]
    settings, db, redis_client, learner_run
) -> None:
    run = learner_run(groups_per_step=2, max_policy_lag=0)
    first = run.add_group([1.0, 0.0, 0.0, 0.0], seed=1)
    run.add_group([0.0, 0.0, 1.0, 0.0], seed=4)
    learner = Learner(settings, run.run_id, consumer="c1")
    try:
        assert learner.step_once(wait_s=5) is not None
        # Sampled by version 0 while the learner is at version 1, with max_policy_lag 0: dropped.
        stale = run.add_group([1.0, 0.0, 0.0, 0.0], seed=2, policy_version=0)
        # A grader that appended the first group twice (at-least-once): acked, not trained again.
        from shared.events import append_group

        append_group(redis_client, run.run_id, first)
        fresh = run.add_group([0.0, 1.0, 0.0, 0.0], seed=3, policy_version=1)
        report = learner.step_once(wait_s=5)
    finally:
        learner.close()
    assert report is not None and report.step == 2
    assert report.stale_group_ids == (stale,)
    assert report.groups_redelivered == 1
    with session_scope(db) as session:
        step = session.scalars(select(Step).where(Step.run_id == run.run_id, Step.step == 2)).one()
        assert (step.groups_trained, step.groups_stale) == (1, 1)
        assert session.get(Group, fresh).status == "consumed"
        assert session.get(Group, stale).status == "consumed"
    assert _pending(redis_client, run.run_id) == 0


def test_unknown_run_is_a_clear_error(settings) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LearnerError, match="no run"):
        Learner(settings, "run_does_not_exist")


def _weights_sha(db, run_id: str, version: int) -> str:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return session.scalars(
            select(Weight.sha256).where(Weight.run_id == run_id, Weight.version == version)
        ).one()


def _wait_for_step(db, run_id: str, step: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope(db) as session:
            if session.scalars(select(Step).where(Step.run_id == run_id, Step.step == step)).first():
                return
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""  # type: ignore[union-attr]
        time.sleep(0.2)
    raise TimeoutError(f"step {step} of {run_id} not committed")


@pytest.mark.slow
def test_killed_learner_resumes_exactly(settings, settings_env, db, learner_run) -> None:  # type: ignore[no-untyped-def]
    rewards = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.2], [0.3, 0.0, 1.0, 0.0]]
    # Uninterrupted reference, in process: three steps.
    reference = learner_run(groups_per_step=1)
    for i, r in enumerate(rewards):
        reference.add_group(r, seed=10 + i)
    learner = Learner(settings, reference.run_id, consumer="c1")
    try:
        for _ in rewards:
            assert learner.step_once(wait_s=5) is not None
    finally:
        learner.close()
    # The same data through `harnessrl serve learner`, SIGKILLed after step 2 and restarted.
    resumed = learner_run(groups_per_step=1)
    for i, r in enumerate(rewards[:2]):
        resumed.add_group(r, seed=10 + i)
    command = [sys.executable, "-m", "services.cli.main", "serve", "learner", "--run", resumed.run_id]
    proc = subprocess.Popen(
        command, env=settings_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_for_step(db, resumed.run_id, 2, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    resumed.add_group(rewards[2], seed=12)
    restart = subprocess.run(
        [*command, "--max-steps", "1", "--idle-exit-s", "60"],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert "step 3 version 3" in restart.stdout
    for version in (1, 2, 3):
        assert _weights_sha(db, resumed.run_id, version) == _weights_sha(db, reference.run_id, version)


def test_a_step_without_signal_still_commits_one_version(settings, db, store, learner_run) -> None:  # type: ignore[no-untyped-def]
    """Every sampling step yields one learner step: with no reward variance anywhere (a random policy that
    never solves a task), the learner commits a step and publishes a version with unchanged weights."""
    run = learner_run(groups_per_step=2)
    flat = [run.add_group([0.0] * 4, seed=1), run.add_group([0.0] * 4, seed=2)]
    learner = Learner(settings, run.run_id, consumer="c1")
    try:
        before = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
        report = learner.step_once(wait_s=5)
        after = learner.model.state_dict()
    finally:
        learner.close()
    assert report is not None and (report.step, report.policy_version) == (1, 1)
    assert report.update.no_update is True
    assert all((before[k] == after[k]).all() for k in before)
    with session_scope(db) as session:
        step = session.scalars(select(Step).where(Step.run_id == run.run_id)).one()
        assert (step.groups_trained, step.groups_zero_variance, step.tokens) == (0, 2, 0)
        assert {session.get(Group, g).status for g in flat} == {"consumed"}
        assert session.get(Run, run.run_id).policy_version == 1
        weight = session.scalars(select(Weight).where(Weight.run_id == run.run_id)).one()
    assert store.exists(weight.object_key)


def test_overlong_penalty_trains_a_group_whose_right_answers_differ_only_in_being_cut(  # type: ignore[no-untyped-def]
    settings, db, learner_run
) -> None:
    """Every rollout right, two of four cut by the token limit: no reward variance without the penalty, a
    trained group with it (the cut ones pushed down); the recorded reward stays the task's."""
    for penalty, trained in ((0.0, 0), (0.5, 1)):
        run = learner_run(groups_per_step=1, overlong_penalty=penalty)
        run.add_group([1.0, 1.0, 1.0, 1.0], seed=1, cut={1, 3})
        report = _step_once(settings, run.run_id)
        assert report is not None
        with session_scope(db) as session:
            step = session.scalars(select(Step).where(Step.run_id == run.run_id)).one()
            assert (step.groups_trained, step.groups_zero_variance) == (trained, 1 - trained)
            assert step.reward_mean == 1.0
            assert step.metrics["cut_fraction"] == (0.5 if trained else 0.0)
            assert (step.tokens > 0) == bool(trained)


@pytest.mark.parametrize(("setting", "dtype"), [(False, "float32"), (True, "bfloat16"), ("auto", None)])
def test_each_step_records_the_dtype_the_learner_computed_in(  # type: ignore[no-untyped-def]
    settings, db, learner_run, setting, dtype
) -> None:
    """``bf16_autocast`` true/false stand; ``auto`` resolves on the learner's device (bf16 where its CPU multiplies
    bf16 natively) and the steps row says which, so a run's SQL tells an fp32 step from a bf16 one."""
    from services.learner.reconstruct import resolve_bf16

    if dtype is None:
        dtype = "bfloat16" if resolve_bf16("auto", torch.device("cpu")) else "float32"
    run = learner_run(groups_per_step=1, bf16_autocast=setting)
    run.add_group([1.0, 0.0, 0.5, 0.0], seed=1)
    assert _step_once(settings, run.run_id) is not None
    with session_scope(db) as session:
        step = session.scalars(select(Step).where(Step.run_id == run.run_id)).one()
        assert step.groups_trained == 1 and step.metrics["compute_dtype"] == dtype


def test_learner_exits_when_its_run_is_over(settings, db, learner_run) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import update

    run = learner_run(groups_per_step=1)
    with session_scope(db) as session:
        session.execute(update(Run).where(Run.id == run.run_id).values(status="completed"))
    learner = Learner(settings, run.run_id, consumer="c1")
    started = time.monotonic()
    try:
        steps = learner.run()
    finally:
        learner.close()
    assert steps == 0 and time.monotonic() - started < 30


@pytest.mark.slow
def test_killed_between_checkpoints_replays_without_loss_or_double_counting(  # type: ignore[no-untyped-def]
    settings, settings_env, db, store, learner_run
) -> None:
    """Checkpoints every 2 steps (keep 1); the learner is SIGKILLed after step 3 (checkpoint 2 is the newest) and
    restarted: it replays step 3 from its recorded groups, then trains steps 4-5. Every group is trained exactly
    once, versions are 1..5 with no repeat, and every version's weights equal an uninterrupted learner's."""
    from services.learner.checkpoint import complete_steps

    rewards = [
        [1.0, 0.0, 0.5, 0.0],
        [0.0, 1.0, 0.0, 0.2],
        [0.3, 0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0, 1.0],
        [1, 0, 0, 1],
    ]
    cadence = {"checkpoint_every": 2, "keep_checkpoints": 1}
    reference = learner_run(groups_per_step=1, **cadence)
    for i, r in enumerate(rewards):  # group i is sampled by version i (on-policy)
        reference.add_group(r, seed=30 + i, policy_version=i)
    learner = Learner(settings, reference.run_id, consumer="c1")
    try:
        for _ in rewards:
            assert learner.step_once(wait_s=5) is not None
    finally:
        learner.close()

    resumed = learner_run(groups_per_step=1, **cadence)
    groups = [resumed.add_group(r, seed=30 + i, policy_version=i) for i, r in enumerate(rewards[:3])]
    command = [sys.executable, "-m", "services.cli.main", "serve", "learner", "--run", resumed.run_id]
    proc = subprocess.Popen(
        command, env=settings_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_for_step(db, resumed.run_id, 3, proc)
        deadline = time.monotonic() + 60
        while 2 not in complete_steps(store, resumed.run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert complete_steps(store, resumed.run_id) == {2: 1}  # step 3 is between checkpoints
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    groups += [resumed.add_group(r, seed=33 + i, policy_version=3 + i) for i, r in enumerate(rewards[3:])]
    restart = subprocess.run(
        [*command, "--max-steps", "2", "--idle-exit-s", "60"],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert "from checkpoint 2, replayed steps 3..3" in restart.stdout
    assert "weights match version 3: True" in restart.stdout
    assert "step 4 version 4" in restart.stdout and "step 5 version 5" in restart.stdout
    with session_scope(db) as session:
        steps = session.scalars(select(Step).where(Step.run_id == resumed.run_id).order_by(Step.step)).all()
        versions = session.scalars(
            select(Weight.version).where(Weight.run_id == resumed.run_id).order_by(Weight.id)
        ).all()
    assert [s.step for s in steps] == [1, 2, 3, 4, 5]
    assert versions == [1, 2, 3, 4, 5]  # strictly increasing, none published twice
    trained = [g for s in steps for g in s.metrics["trained_group_ids"]]
    assert sorted(trained) == sorted(groups) and len(set(trained)) == len(trained)
    for version in range(1, 6):
        assert _weights_sha(db, resumed.run_id, version) == _weights_sha(db, reference.run_id, version)
    # Checkpoints every 2 steps, only the newest kept: step 4's.
    assert complete_steps(store, resumed.run_id) == {4: 1}
