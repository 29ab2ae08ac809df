"""Smoke run of ``harnessrl bench learner --quick``: the figures exist, are consistent, and the trie is exact."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.slow]


def test_bench_learner_quick_json() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.cli.main",
            "bench",
            "learner",
            "--quick",
            "--json",
            "--model",
            "tiny",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    model = result["models"]["tiny"]
    rows = model["strategies"]
    assert set(rows) == {"per_request", "prefix_merging", "trie"}
    assert model["trie_tokens_equal_lower_bound"] is True
    assert rows["trie"]["tokens_computed"] == result["trie_lower_bound_tokens"]
    assert (
        rows["per_request"]["tokens_computed"]
        > rows["prefix_merging"]["tokens_computed"]
        > rows["trie"]["tokens_computed"]
    )
    assert rows["per_request"]["flops"] > rows["prefix_merging"]["flops"] > rows["trie"]["flops"]
    assert 0 < rows["per_request"]["measured_fraction"] < 1  # measured on one rollout, scaled by count
    for row in rows.values():
        assert row["step_cpu_s"] > 0 and row["peak_memory_bytes"] >= 0
    for ratio in model["ratios"].values():
        assert ratio["flops"] > 1 and ratio["time"] > 0
    assert 0 < model["load_and_pack_share_of_step"] < 1


def test_bench_learner_two_ranks_shards_the_state() -> None:
    """``--ranks 2``: FSDP2 holds half of the replicated parameter + gradient + optimizer bytes per rank."""
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "bench", "learner", "--ranks", "2", "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = json.loads(done.stdout)
    assert result["model"] == "wide" and result["ranks"] == 2
    summary = result["summary"]
    assert summary["replicate"]["state_share_of_replicated"] == 1.0
    for layout in ("fsdp", "fsdp+ac"):
        assert 0.45 <= summary[layout]["state_share_of_replicated"] <= 0.6
        assert summary[layout]["in_step_share_of_replicated"] > summary[layout]["state_share_of_replicated"]
