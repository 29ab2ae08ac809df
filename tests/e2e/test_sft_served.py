"""SFT lowers the loss on its data and raises the demonstrated tokens' logprobs as served by vLLM (issue 38).

Real pieces end to end: rollouts recorded as the gateway and grader record them (token segments + ``calls`` and
``rewards`` rows; half rewarded), an SFT run on the rewarded ones (``--from-run RUN --min-reward 1``, selected by
``shared/rollout_selection.py``) trained by the SFT learner in process, its last version served by the inference
updater on a real vLLM server exactly as ``harnessrl eval --run SFT_RUN`` serves it (an eval's ``weights``
target). vLLM itself scores the demonstrated tokens (``prompt_logprobs``) under version 0 and under the SFT
version: every demonstration's mean logprob must rise, and the unrewarded rollouts', which SFT never saw, by less.
A GRPO run started from the SFT version (``--init``) is then served those weights as its version 0 by the rebase.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import numpy as np
import pytest
from sqlalchemy import select

from services.learner.sft_loop import SFTLearner
from shared.db import session_scope
from shared.ids import new_id
from shared.inference_client import InferenceClient
from shared.models import Call, Reward, Rollout, Run, Step
from shared.rollout_selection import select_rollouts
from shared.run_config import EvalTarget
from shared.step_record import StepRecord
from shared.trajectory import load_chain
from tests.e2e.test_inference_server import PROMPT
from tests.e2e.test_inference_swap import updater  # noqa: F401  (fixture reused)
from tests.fixtures.services import run_row

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.timeout(1500),  # the shared vLLM server may start first: minutes on a busy 2-core machine
]

EPOCHS = 6


def served_logprobs(base_url: str, ids: list[int], positions: list[int]) -> list[float]:
    """The served model's logprob of ``ids[p]`` after ``ids[:p]`` for each position ``p`` (``prompt_logprobs``)."""
    body = {"model": "policy", "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0}
    request = urllib.request.Request(
        f"{base_url}/v1/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        entries = json.loads(response.read())["choices"][0]["prompt_logprobs"]
    return [float(entries[p][str(ids[p])]["logprob"]) for p in positions]


def demonstrated(db, store, rollout_ids: list[str]) -> dict[str, tuple[list[int], list[int]]]:  # type: ignore[no-untyped-def]
    """Each rollout's chain ids and the positions of the tokens it produced (loss mask 1), as recorded."""
    out = {}
    with session_scope(db) as session:
        for rollout_id in rollout_ids:
            calls = session.scalars(select(Call).where(Call.rollout_id == rollout_id)).all()
            chain = load_chain(store, calls, rollout_id=rollout_id)
            out[rollout_id] = (chain.ids.tolist(), np.flatnonzero(chain.loss_mask).tolist())
    return out


def mean_served(base_url: str, chains: dict[str, tuple[list[int], list[int]]]) -> dict[str, float]:
    return {rid: float(np.mean(served_logprobs(base_url, ids, at))) for rid, (ids, at) in chains.items()}


# Slow (about a minute after the shared vLLM server is up): the served side of SFT exists only end to end.
async def test_sft_lowers_its_loss_and_raises_the_demonstrated_tokens_served_logprobs(  # type: ignore[no-untyped-def]
    updater,  # noqa: F811
    vllm_server,
    settings,
    db,
    store,
    learner_run,
    tiny_model_dir,
) -> None:
    source = learner_run(groups_per_step=2)
    source.add_group([1.0, 0.0, 1.0, 0.0], seed=11)
    source.add_group([0.0, 1.0, 0.0, 1.0], seed=12)
    rewarded = select_rollouts(settings.database_url, from_run=source.run_id, min_reward=1.0)
    with session_scope(db) as session:
        every = session.scalars(select(Rollout.id).where(Rollout.run_id == source.run_id)).all()
        rewards = {
            r.rollout_id: r.reward
            for r in session.scalars(select(Reward).where(Reward.rollout_id.in_(every)))
        }
    assert sorted(rewarded) == sorted(r for r in every if rewards[r] == 1.0) and len(rewarded) == 4
    unrewarded = [r for r in every if r not in rewarded]

    sft_id = new_id("sft")
    spec = {"from_run": source.run_id, "min_reward": 1.0, "rollout_ids": rewarded, "epochs": EPOCHS,
            "batch_rollouts": 4, "learning_rate": 1e-3}  # fmt: skip
    with session_scope(db) as session:
        row = run_row(sft_id, model="tiny", model_dir=str(tiny_model_dir), sft=spec)
        row.status = "running"
        session.add(row)
    learner = SFTLearner(settings, sft_id)
    try:
        assert learner.run() == EPOCHS
    finally:
        learner.close()
    with session_scope(db) as session:
        assert session.get(Run, sft_id).status == "completed"  # type: ignore[union-attr]
        steps = [
            StepRecord.from_row(s)
            for s in session.scalars(select(Step).where(Step.run_id == sft_id).order_by(Step.step))
        ]
    losses = [s.update.loss for s in steps]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses  # one batch: every step on it
    assert losses[-1] < losses[0] - 1.0, losses

    chains = demonstrated(db, store, rewarded + unrewarded)
    before = mean_served(vllm_server, chains)  # version 0: the base weights the shared server starts with

    # Serve the SFT run's last version as `harnessrl eval --run SFT_RUN` does: an eval run targeting its weights.
    eval_id = f"eval-{uuid.uuid4().hex[:8]}"
    target = EvalTarget(source="weights", run_id=sft_id, version=EPOCHS)
    with session_scope(db) as session:
        session.add(run_row(eval_id, model="tiny", group_size=1, target=target.model_dump()))
    outcome = await updater.serve_eval(eval_id, target)
    assert outcome.status == "served", outcome.error
    async with InferenceClient(vllm_server) as client:
        assert (await client.complete(PROMPT, max_tokens=4, seed=1)).policy_version == EPOCHS
    after = mean_served(vllm_server, chains)

    # A GRPO run started from the SFT version (--init SFT_RUN@N): the pool's rebase serves those weights as its
    # version 0, not the base weights (rebased to a run without init first, so the engine really swaps).
    plain, warm = f"run-{uuid.uuid4().hex[:8]}", f"run-{uuid.uuid4().hex[:8]}"
    with session_scope(db) as session:
        session.add(run_row(plain, model="tiny", group_size=1))
        session.add(run_row(warm, model="tiny", group_size=1, init={"run_id": sft_id, "version": EPOCHS}))
    assert (await updater.rebase(plain)).status == "served"
    assert mean_served(vllm_server, chains) == pytest.approx(before, abs=1e-4)  # the base weights again
    assert (await updater.rebase(warm)).status == "served"
    async with InferenceClient(vllm_server) as client:
        assert (await client.complete(PROMPT, max_tokens=4, seed=1)).policy_version == 0
    assert mean_served(vllm_server, chains) == pytest.approx(after, abs=1e-4)

    rise = {rid: after[rid] - before[rid] for rid in chains}
    print(f"SFT losses {[round(x, 3) for x in losses]}; served mean logprob rise: "
          f"demonstrated {np.mean([rise[r] for r in rewarded]):+.3f}, others {np.mean([rise[r] for r in unrewarded]):+.3f}")  # fmt: skip
    assert all(rise[r] > 0.5 for r in rewarded), rise
    assert np.mean([rise[r] for r in rewarded]) > np.mean([rise[r] for r in unrewarded]) + 0.5, rise
