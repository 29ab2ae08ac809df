"""One run seed of the learning recipe derives independent streams (``shared.sampling_seed.stream_seed``):
task order, the training run's sampling seed, the learner's seed and the evals' seed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from benchmarks.recipe import RECIPE, training_run_body
from services.api.schemas import RunCreate
from shared.sampling_seed import SEED_STREAMS, stream_seed

pytestmark = pytest.mark.unit


def test_each_stream_has_its_own_seed_and_each_run_seed_its_own_streams() -> None:
    seeds = {
        (run_seed, stream): stream_seed(run_seed, stream) for run_seed in (0, 1, 2) for stream in SEED_STREAMS
    }
    assert len(set(seeds.values())) == len(seeds)
    assert stream_seed(1, "learner") == seeds[(1, "learner")]  # a function of its names alone
    assert all(0 <= s < 2**31 for s in seeds.values())
    with pytest.raises(ValueError, match="unknown seed stream"):
        stream_seed(0, "bogus")


def test_the_training_run_seeds_its_sampling_and_its_learner_from_the_run_seed() -> None:
    def body(seed: int) -> RunCreate:
        raw = training_run_body(replace(RECIPE, seed=seed), "policy", ["factorial-1"])
        return RunCreate.model_validate_json(json.dumps(raw))  # as the api parses it

    first, again, other = body(0), body(0), body(1)
    assert first.sampling.seed == stream_seed(0, "train_sampling") == again.sampling.seed
    assert first.grpo.seed == stream_seed(0, "learner") != first.sampling.seed
    assert (other.sampling.seed, other.grpo.seed) == (
        stream_seed(1, "train_sampling"),
        stream_seed(1, "learner"),
    )
