"""Smoke run of ``harnessrl bench gateway``: the figures of every call kind exist, each episode's calls were
spliced into one chain (the bench refuses otherwise), and a group's repeated first prompt is tokenized from the turn
cache, not again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gateway import THROUGHPUT_ROUNDS

pytestmark = [pytest.mark.bench, pytest.mark.slow]


def test_bench_gateway_json(settings_env: dict[str, str], tiny_model_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "bench", "gateway", "--workers", "2", "--sizes", "2000",
         "--episodes", "8", "--streaming-episodes", "8", "--concurrency", "4", "--throughput-episodes", "32", "--settle-s", "20", "--json"],
        capture_output=True, text=True, timeout=600,
        env={**settings_env, "OMP_NUM_THREADS": "1", "HARNESSRL_MODEL_DIR": str(tiny_model_dir)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert [run["workers"] for run in result["runs"]] == [1, 2]
    # the objects went under the data directory, as the product's do, and the filesystem's cost is recorded
    assert result["objects"]["directory"] == settings_env["HARNESSRL_DATA_DIR"]
    objects = result["objects"]
    assert objects["file_create_us"] > 0 and objects["file_create_first_us"] > 0
    # it waited for file creation to settle (ext4's recently-deleted inodes) only while it was slow, and not forever
    from benchmarks.gateway import FILE_CREATE_SETTLED_US, FILE_CREATE_WAIT_S

    assert objects["file_create_waited_s"] == 0 or objects["file_create_first_us"] > FILE_CREATE_SETTLED_US
    assert objects["file_create_waited_s"] < 20 + 30 < FILE_CREATE_WAIT_S  # --settle-s 20 bounds it
    for run in result["runs"]:
        latency = run["latency"]["2k"]
        assert 2000 <= latency["prompt_tokens"] <= 2500  # the 2k user text, tools, system turn
        for kind in ("new_chain", "new_chain_group", "spliced"):
            assert latency[kind]["gateway_p50_ms"] > 0 and latency[kind]["direct_p50_ms"] > 0
            streamed = run["streaming"][kind]
            assert streamed["gateway"]["ttfb_p50_ms"] > 0 and streamed["direct"]["inter_chunk_p50_ms"] > 0
            # each streamed call is paired with its prompt sent direct: 8 episodes, half of them a new prompt
            assert streamed["calls"] == (8 if kind == "spliced" else 4)
            assert (
                streamed["ttfb_added_p99_ms"]
                >= streamed["ttfb_added_p50_ms"]
                > -streamed["direct"]["ttfb_p50_ms"]
            )
        # ~2k tokens of BPE for a new prompt; the group's second rollout finds every turn in the cache. Through tiktoken
        # (services/gateway/fast_bpe.py) the 2k-token turn is ~0.4 of a ~1 ms plan (render, digests and the rest are
        # the other 0.6), so the cached plan is shorter, not halved; the cache itself is tested in test_chat_format.py
        plan = {kind: latency[kind]["stages_p50_ms"]["plan"] for kind in ("new_chain", "new_chain_group")}
        assert plan["new_chain_group"] < plan["new_chain"], plan
        (throughput,) = run["throughput"]
        # 32 episodes in THROUGHPUT_ROUNDS rounds of at least one episode per connection (4), two calls each
        requests = THROUGHPUT_ROUNDS * max(32 // THROUGHPUT_ROUNDS, 4) * 2
        assert (
            throughput["concurrency"] == 4 and throughput["requests"] == requests and throughput["group"] == 8
        )
        assert throughput["warmed"]  # an unmeasured round at this concurrency came first
        # gateway and direct rounds alternate; the figures are their sums
        rounds = throughput["rounds"]
        assert len(rounds) == THROUGHPUT_ROUNDS and sum(r["requests"] for r in rounds) == requests
        assert all(
            r["direct_requests"] == r["requests"] and r["gateway_recorded_s"] >= r["gateway_s"]
            for r in rounds
        )
        assert throughput["gateway_requests_per_s"] > 0 and throughput["direct_requests_per_s"] > 0
