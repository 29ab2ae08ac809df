"""Checkpoints restore model, optimizer and RNGs so the next step is bit-identical; old ones are pruned; weights
blobs are servable."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load

from services.learner import grpo
from services.learner.checkpoint import LearnerState, load_checkpoint, save_checkpoint
from services.learner.publish import put_weights
from services.learner.types import TrainingBatch
from shared.objectstore import LocalObjectStore, ObjectNotFound

pytestmark = pytest.mark.unit


def _step(model, optimizer, batch, config) -> None:  # type: ignore[no-untyped-def]
    grpo.grpo_step(model, optimizer, TrainingBatch(grpo.with_advantages(batch.rollouts, config)), config)


def test_resumed_step_equals_uninterrupted(tiny_policy, small_batch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalObjectStore(tmp_path)
    config = grpo.GRPOConfig(learning_rate=1e-3)
    torch.manual_seed(0)
    straight = tiny_policy()
    opt = grpo.make_optimizer(straight, config)
    _step(straight, opt, small_batch, config)
    save_checkpoint(
        store, "run1", straight, opt, LearnerState(step=1, policy_version=1, consumed_group_ids=["g0"])
    )
    before = torch.rand(3)  # RNG draws after the checkpoint must repeat after the restore
    _step(straight, opt, small_batch, config)

    resumed = tiny_policy()  # base weights, fresh optimizer: everything must come from the checkpoint
    opt2 = grpo.make_optimizer(resumed, config)
    state = load_checkpoint(store, "run1", 1, resumed, opt2)
    assert state == LearnerState(step=1, policy_version=1, consumed_group_ids=["g0"])
    assert torch.equal(torch.rand(3), before)
    _step(resumed, opt2, small_batch, config)
    for (name, a), (_, b) in zip(straight.named_parameters(), resumed.named_parameters(), strict=True):
        assert torch.equal(a, b), name


def test_missing_checkpoint_raises(tiny_policy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy()
    with pytest.raises(ObjectNotFound):
        load_checkpoint(
            LocalObjectStore(tmp_path), "run1", 7, model, grpo.make_optimizer(model, grpo.GRPOConfig())
        )


def test_weights_blob_matches_the_model_directory(tiny_policy, tiny_model_dir_tied, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from services.learner.policy import load_policy

    store = LocalObjectStore(tmp_path)
    for model, directory in ((tiny_policy(), None), (load_policy(tiny_model_dir_tied), tiny_model_dir_tied)):
        published = put_weights(store, "run1", 1, model)
        tensors = load(store.get_bytes(published.object_key))
        expected = model.state_dict()
        if directory is not None:  # tied: the head is the embedding and is not written twice
            assert "lm_head.weight" not in tensors
            assert tensors.keys() == load((directory / "model.safetensors").read_bytes()).keys()
        for name, tensor in tensors.items():
            assert torch.equal(tensor, expected[name]), name


def test_writer_keeps_the_newest_and_complete_means_every_rank(tiny_policy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from services.learner.checkpoint import CheckpointWriter, complete_steps, newest_checkpoint, snapshot

    store = LocalObjectStore(tmp_path)
    model = tiny_policy()
    optimizer = grpo.make_optimizer(model, grpo.GRPOConfig())
    writer = CheckpointWriter(store, "run1", rank=0, world_size=1, keep=2)
    for step in (2, 4, 6):
        writer.write(step, snapshot(model, optimizer, LearnerState(step=step, policy_version=step)))
    writer.wait()
    assert writer.error is None and writer.last_write_s is not None
    assert complete_steps(store, "run1") == {4: 1, 6: 1}
    assert newest_checkpoint(store, "run1", at_most=5, world_size=1) == 4  # never past the committed step
    assert newest_checkpoint(store, "run1", at_most=3, world_size=1) == 0  # none: replay from the base model
    # A checkpoint one rank of two wrote is incomplete; one written by another world size is a clear error.
    store.put_bytes("checkpoints/run1/00000008/rank-0-of-2.pt", b"x")
    assert 8 not in complete_steps(store, "run1")
    store.put_bytes("checkpoints/run1/00000008/rank-1-of-2.pt", b"x")
    with pytest.raises(ValueError, match="written by 2 rank"):
        newest_checkpoint(store, "run1", at_most=9, world_size=1)


def test_adapter_names_carry_their_version() -> None:
    from shared.adapters import adapter_config_key, adapter_key, adapter_name, adapter_version, is_adapter_key

    assert adapter_version(adapter_name("run_a-v2", 7)) == 7
    assert adapter_version("policy") is None
    key = adapter_key("run_a", 3)
    assert is_adapter_key(key) and adapter_config_key(key) == "adapters/run_a/3/adapter_config.json"
