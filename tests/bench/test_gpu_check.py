"""``scripts/gpu-check.sh`` runs (on CPU here, with its small config) and writes one JSON file whose checks pass,
so the prepared GPU check cannot rot while no GPU is at hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_on_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "check.json"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(out), "--cpu"],
        env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["status"] == "ok"
    assert result["trie_gradients"]["ok"] and result["trie_gradients"]["trie_attention"] == "packed"
    assert result["fsdp"]["ok"]
    bench = result["bench"]
    assert set(bench["strategies"]) == {"per_request", "prefix_merging", "trie"}
    assert all(row["step_s"] > 0 and row["peak_memory_bytes"] > 0 for row in bench["strategies"].values())
    assert bench["ratios"]["per_request/trie"] > 1
