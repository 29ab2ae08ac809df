"""The direction of learning through the whole path, on the small real model (issue 11).

A training run on a running ``harnessrl up`` serving SmolLM2-135M-Instruct: the ``codeblock`` harness answers a
``swe_micro`` task in the sandbox through the gateway and real vLLM, the grader scores each answer in a clean
sandbox, the learner trains one GRPO step on the group, publishes, and the updater swaps the new version into
vLLM. Then the inference service — not the learner — scores every rollout's sampled tokens again
(``prompt_logprobs``) under the new version: against the logprobs vLLM recorded when it sampled them (the
behaviour logprobs, read back through ``shared.trajectory``), the rewarded rollouts' mean logprob must rise and
the unrewarded ones' must fall.

The group needs mixed rewards: the task is one the base model solves about a third of the time, and the run has
a few steps so that a step whose group happened to be uniform (no signal, nothing trained) is followed by
another; the first step the learner trained is the one checked.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from shared.db import make_engine
from shared.events import connect
from shared.models import Call, Reward, Rollout, Run, Step, Weight
from shared.objectstore import open_store
from shared.pool import get_served
from shared.trajectory import load_chain
from tests.e2e.test_suite import follow
from tests.fixtures.suite import running_test_suite

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TASK_ID = (
    "fahrenheit-3"  # "to_fahrenheit forgets the offset": the base model solves it about a third of the time
)
GROUP_SIZE = 10
STEPS = 3


@pytest.fixture(scope="module")
def small_suite(small_model_dir: Path) -> Iterator[Any]:
    # Every rollout of a group at once, so vLLM batches them.
    with running_test_suite(
        small_model_dir,
        runner_concurrency=GROUP_SIZE,
        rollout_timeout_s=240.0,
        task_visibility_timeout_s=300.0,
    ) as suite:
        yield suite


def served_logprobs(base_url: str, model: str, ids: list[int], start: int) -> list[float]:
    """The served model's logprob of each token ``ids[start:]`` after the tokens before it (``prompt_logprobs``)."""
    body = {"model": model, "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0}
    request = urllib.request.Request(
        f"{base_url}/v1/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        entries = json.loads(response.read())["choices"][0]["prompt_logprobs"]
    return [float(entries[i][str(ids[i])]["logprob"]) for i in range(start, len(ids))]


# Slow (minutes, the slowest learning test): a suite on SmolLM2-135M and real GRPO steps; no benchmark checks the
# direction of a step through the whole path (harnessrl bench learning measures pass@1 over many steps), so it stays.
def test_one_step_raises_rewarded_tokens_and_lowers_unrewarded_ones(small_suite: Any) -> None:
    from services.api.client import ApiClient, default_api_url

    settings = small_suite.settings
    engine = make_engine(settings.database_url, pool_size=1)
    client = ApiClient(default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        run_id = client.create_run(
            {
                "name": "direction",
                "model": settings.served_model_name,
                "harness": "codeblock",
                "dataset": "swe_micro",
                "instance_ids": [TASK_ID],
                "groups_per_step": 1,
                "group_size": GROUP_SIZE,
                "steps": STEPS,
                "sampling": {"temperature": 0.7, "max_tokens": 160},
                "grpo": {"learning_rate": 2e-5, "seed": 0},
            }
        )["id"]

        def trained_step() -> Any:
            with engine.connect() as conn:
                return conn.execute(
                    select(Step.step, Step.policy_version, Step.metrics)
                    .where(Step.run_id == run_id, Step.groups_trained > 0)
                    .order_by(Step.step)
                ).first()

        def run_status() -> str:
            with engine.connect() as conn:
                return str(conn.execute(select(Run.status).where(Run.id == run_id)).scalar_one())

        def trained_and_served() -> bool:
            step = trained_step()
            if step is None:
                return run_status() in ("completed", "failed", "stopped")
            with engine.connect() as conn:
                status = conn.execute(
                    select(Weight.status).where(
                        Weight.run_id == run_id, Weight.version == step.policy_version
                    )
                ).scalar()
            return status in ("served", "rejected", "failed")

        follow(small_suite, trained_and_served, 1500, "a trained step whose version is served")
        step = trained_step()
        assert step is not None, f"no step trained a group (every group uniform?): {client.get_run(run_id)}"
        # No further version may be served while the scores are read: stop the run (its learner exits).
        client.stop_run(run_id)
        with engine.connect() as conn:
            weight = conn.execute(
                select(Weight.status, Weight.error).where(
                    Weight.run_id == run_id, Weight.version == step.policy_version
                )
            ).one()
            assert weight.status == "served", weight
            # On-policy: the learner's step s trains the groups sampled by version s - 1 and publishes version s.
            sampled_version = step.policy_version - 1
            trained_groups = step.metrics["trained_group_ids"]
            rollouts = conn.execute(
                select(Rollout.id, Reward.reward)
                .join(Reward, Reward.rollout_id == Rollout.id)
                .where(Rollout.group_id.in_(trained_groups))
                .order_by(Rollout.index_in_group)
            ).all()
            calls = {
                rollout_id: conn.execute(select(Call).where(Call.rollout_id == rollout_id)).all()
                for rollout_id, _ in rollouts
            }
        with closing(connect(settings.redis_url)) as redis_client:
            served = get_served(redis_client)
        assert served is not None and (served.run_id, served.version) == (run_id, step.policy_version), served

        store = open_store(settings)
        inference_url = f"http://{settings.host}:{settings.inference_port}"
        changes: dict[bool, list[float]] = {True: [], False: []}
        for rollout_id, reward in rollouts:
            chain = load_chain(store, calls[rollout_id], rollout_id=rollout_id)
            assert len(chain.calls) == 1, "the codeblock harness makes one call per rollout"
            assert set(chain.policy_versions.tolist()) == {sampled_version}, chain.policy_versions
            start = chain.prompt_length(0)  # the sampled tokens are the chain's tail
            assert chain.loss_mask[start:].all() and not chain.loss_mask[:start].any()
            after = served_logprobs(inference_url, settings.served_model_name, chain.ids.tolist(), start)
            before = chain.behavior_logprobs[start:]
            changes[reward == 1.0].append(float(np.mean(after) - np.mean(before)))
        with closing(connect(settings.redis_url)) as redis_client:
            still = get_served(redis_client)
        assert still == served, f"the pool changed while scoring: {served} -> {still}"
    finally:
        client.close()
        engine.dispose()

    assert changes[True] and changes[False], f"the trained group needs mixed rewards: {changes}"
    rewarded, unrewarded = float(np.mean(changes[True])), float(np.mean(changes[False]))
    print(
        f"mean logprob change: rewarded {rewarded:+.4f} ({len(changes[True])}), unrewarded {unrewarded:+.4f} ({len(changes[False])})"
    )
    assert rewarded > 0, (rewarded, unrewarded, changes)
    assert unrewarded < 0, (rewarded, unrewarded, changes)
