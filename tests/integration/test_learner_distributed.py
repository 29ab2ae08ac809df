"""Two ranks under ``torchrun`` (gloo, CPU) take the same GRPO update as one process: sharded (FSDP2, the default)
and replicated, on batches with shared prefixes, forks, cut turns and mixed policy versions."""

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

    from services.learner.distributed import shard_model
    from services.learner.memory import state_bytes

    rank, world = init_from_env()
    torch.manual_seed(0)
    model = load_policy(sys.argv[1], getattr(torch, sys.argv[4]))
    config = grpo.GRPOConfig(learning_rate=1e-3, max_pack_tokens=200, data_parallel=sys.argv[3])
    if config.data_parallel == "fsdp":
        shard_model(model, bf16=False)
    optimizer = grpo.make_optimizer(model, config)
    batch = TrainingBatch(grpo.with_advantages(harness_batch(SMALL_SHAPE, seed=1).rollouts, config))
    result = grpo.grpo_step(model, optimizer, batch, config, rank=rank, world_size=world)
    # Full tensors on every rank (a sharded parameter is gathered one at a time).
    state = {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).contiguous() for k, v in model.state_dict().items()
    }
    for name, param in model.named_parameters():
        grad = param.grad
        state["grad." + name] = (grad.full_tensor() if hasattr(grad, "full_tensor") else grad).contiguous()
    state["loss"] = torch.tensor([result.metrics["loss"]], dtype=torch.float64)
    state["state_bytes"] = torch.tensor([state_bytes(model, optimizer)["total"]], dtype=torch.int64)
    save_file(state, f"{sys.argv[2]}/rank{rank}.safetensors")
    """
)


# Gradients agree to fp32 round-off (relative to each tensor's largest gradient). The parameters after the step
# are compared relative to how far the step moved each tensor: AdamW's first step moves a weight by about
# lr * g / (|g| + eps), so for a gradient element near eps a difference in its last fp32 bits (summation order:
# the packed trie and the reduce-scatter add in another order) is magnified up to lr * delta_g / eps. In fp64 the
# same comparison is tight: the algorithm itself is exact.
@pytest.mark.parametrize(
    "data_parallel, dtype, tolerance",
    [("fsdp", "float32", 1e-2), ("fsdp", "float64", 1e-9), ("replicate", "float32", 1e-3)],
)
def test_two_ranks_take_the_same_step_as_one(  # type: ignore[no-untyped-def]
    tiny_model_dir, tmp_path, settings_env, data_parallel, dtype, tolerance
) -> None:
    from services.learner.policy import load_policy
    from services.learner.synthetic import harness_batch
    from tests.fixtures.learner import SMALL_SHAPE

    script = tmp_path / "dp_step.py"
    script.write_text(SCRIPT)
    command = [*TORCHRUN_TWO_RANKS, str(script), str(tiny_model_dir), str(tmp_path), data_parallel, dtype]
    done = subprocess.run(command, env=settings_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    torch.manual_seed(0)
    model = load_policy(tiny_model_dir, getattr(torch, dtype))
    config = grpo.GRPOConfig(learning_rate=1e-3, max_pack_tokens=200)
    optimizer = grpo.make_optimizer(model, config)
    batch = TrainingBatch(grpo.with_advantages(harness_batch(SMALL_SHAPE, seed=1).rollouts, config))
    single = grpo.grpo_step(model, optimizer, batch, config)
    ranks = [load_file(tmp_path / f"rank{r}.safetensors") for r in (0, 1)]
    gradient_tolerance = 1e-5 if dtype == "float32" else 1e-10
    for name, param in model.named_parameters():
        scale = float(param.grad.abs().max())
        assert scale > 0, name
        assert float((ranks[0]["grad." + name] - param.grad).abs().max()) <= gradient_tolerance * scale, name
    base = load_policy(tiny_model_dir, getattr(torch, dtype)).state_dict()
    grads = {name: param.grad for name, param in model.named_parameters()}
    for name, param in model.state_dict().items():
        assert torch.equal(ranks[0][name], ranks[1][name]), name  # the ranks stay in lockstep
        moved = float((param - base[name]).abs().max())
        assert moved > 0, name
        # Same update up to float summation order: far below the size of the update itself, wherever the update
        # is well conditioned. A gradient element within a few hundred eps of zero has an fp32 update that its
        # last bits decide (header comment); fp64 compares every element, at 1e-9.
        difference = (ranks[0][name] - param).abs()
        if dtype == "float32":
            difference = difference[grads[name].abs() > 300 * config.adam_epsilon]
        assert float(difference.max()) <= tolerance * moved, name
    assert float(ranks[0]["loss"][0]) == pytest.approx(single.metrics["loss"], rel=1e-5)
    # Sharded, each rank holds about half of the parameters, gradients and AdamW state.
    from services.learner.memory import state_bytes

    whole = state_bytes(model, optimizer)["total"]
    held = [int(r["state_bytes"][0]) for r in ranks]
    if data_parallel == "fsdp":
        assert all(0.45 * whole <= h <= 0.55 * whole for h in held), (held, whole)
    else:
        assert held == [whole, whole]


def test_serve_learner_under_torchrun_matches_one_process(  # type: ignore[no-untyped-def]
    settings, settings_env, db, store, learner_run, tiny_model_dir
) -> None:
    """``harnessrl serve learner`` on two ranks (FSDP2, the default) commits once and publishes the weights one
    process would (within the fp32 tolerance of the step test above)."""
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
    base = load((tiny_model_dir / "model.safetensors").read_bytes())
    for name in a:
        moved = float((a[name] - base[name]).abs().max())
        assert moved > 0, name
        # AdamW's first step: lr * g / (|g| + eps). An element whose gradient is near 0 may land anywhere in
        # [-lr, lr] on a summation-order difference, so a handful of elements may differ by up to the step itself;
        # everything else agrees to 1% of the step (the step test above checks gradients directly).
        difference = (a[name] - b[name]).abs()
        assert float(difference.max()) <= 2 * moved, name
        assert float((difference > 1e-2 * moved).double().mean()) <= 1e-3, name
