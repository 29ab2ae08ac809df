"""Checkpoints restore model, optimizer and RNGs so the next step is bit-identical; weights blobs are servable."""

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
