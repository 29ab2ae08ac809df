"""Two data-parallel processes under ``torchrun`` (gloo, CPU) take the same GRPO update as one process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file

from services.learner import grpo
from services.learner.types import TrainingBatch

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TORCHRUN_TWO_RANKS = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from safetensors.torch import save_file
    from services.learner import grpo
    from services.learner.distributed import init_from_env
    from services.learner.policy import load_policy
    from services.learner.synthetic import harness_batch
    from services.learner.types import TrainingBatch
    from tests.fixtures.learner import SMALL_SHAPE

    rank, world = init_from_env()
    torch.manual_seed(0)
    model = load_policy(sys.argv[1])
    config = grpo.GRPOConfig(learning_rate=1e-3, max_pack_tokens=200)
    optimizer = grpo.make_optimizer(model, config)
    batch = TrainingBatch(grpo.with_advantages(harness_batch(SMALL_SHAPE, seed=1).rollouts, config))
    result = grpo.grpo_step(model, optimizer, batch, config, rank=rank, world_size=world)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    state["loss"] = torch.tensor([result.metrics["loss"]], dtype=torch.float64)
    save_file(state, f"{sys.argv[2]}/rank{rank}.safetensors")
    """
)


def test_two_ranks_take_the_same_step_as_one(tiny_model_dir, tmp_path, settings_env) -> None:  # type: ignore[no-untyped-def]
    from services.learner.policy import load_policy
    from services.learner.synthetic import harness_batch
    from tests.fixtures.learner import SMALL_SHAPE

    script = tmp_path / "dp_step.py"
    script.write_text(SCRIPT)
    command = [
        *TORCHRUN_TWO_RANKS,
        str(script),
        str(tiny_model_dir),
        str(tmp_path),
    ]
    done = subprocess.run(command, env=settings_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    torch.manual_seed(0)
    model = load_policy(tiny_model_dir)
    config = grpo.GRPOConfig(learning_rate=1e-3, max_pack_tokens=200)
    optimizer = grpo.make_optimizer(model, config)
    batch = TrainingBatch(grpo.with_advantages(harness_batch(SMALL_SHAPE, seed=1).rollouts, config))
    single = grpo.grpo_step(model, optimizer, batch, config)
    ranks = [load_file(tmp_path / f"rank{r}.safetensors") for r in (0, 1)]
    base = load_policy(tiny_model_dir).state_dict()
    for name, param in model.state_dict().items():
        assert torch.equal(ranks[0][name], ranks[1][name]), name  # the ranks stay in lockstep
        moved = float((param - base[name]).abs().max())
        assert moved > 0, name
        # Same update up to float summation order: far below the size of the update itself.
        assert float((ranks[0][name] - param).abs().max()) <= 1e-3 * moved + 1e-7, name
    assert float(ranks[0]["loss"][0]) == pytest.approx(single.metrics["loss"], rel=1e-5)


def test_serve_learner_under_torchrun_matches_one_process(  # type: ignore[no-untyped-def]
    settings, settings_env, db, store, learner_run
) -> None:
    from sqlalchemy import select

    from services.learner.loop import Learner
    from shared.db import session_scope
    from shared.models import Step, Weight

    rewards = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.2]]
    single = learner_run(groups_per_step=2)
    parallel = learner_run(groups_per_step=2)
    for run in (single, parallel):
        for i, r in enumerate(rewards):
            run.add_group(r, seed=20 + i)
    learner = Learner(settings, single.run_id, consumer="c1")
    try:
        assert learner.step_once(wait_s=5) is not None
    finally:
        learner.close()
    command = [
        *TORCHRUN_TWO_RANKS,
        "-m",
        "services.cli.main",
        "serve",
        "learner",
        "--run-id",
        parallel.run_id,
        "--max-steps",
        "1",
    ]
    done = subprocess.run(command, env=settings_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with session_scope(db) as session:
        keys = {
            run.run_id: session.scalars(select(Weight.object_key).where(Weight.run_id == run.run_id)).one()
            for run in (single, parallel)
        }
        steps = session.scalars(select(Step).where(Step.run_id == parallel.run_id)).all()
    assert [s.step for s in steps] == [1]  # one commit, by rank 0 only
    from safetensors.torch import load

    a, b = (load(store.get_bytes(keys[run.run_id])) for run in (single, parallel))
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=0, atol=1e-6), name
