"""No code in ``services/`` or ``shared/`` reads or writes a key of ``steps.metrics`` except through the record
layer (``shared/step_record.py``): a grep over the source for the ways such code has been written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
RECORD_MODULE = ROOT / "shared" / "step_record.py"

RAW_ACCESS = {
    "a JSON operator on metrics in SQL": re.compile(r"\bmetrics\s*(->>?|#>>?|\?)"),
    "a steps row's metrics by key": re.compile(r"""\[\s*["']metrics["']\s*\]|\.get\(\s*["']metrics["']"""),
    "the ORM column Step.metrics": re.compile(r"\bStep\.metrics\b"),
    "a key of a step row's metrics attribute": re.compile(
        r"\b(row|step|r|s|previous)\.metrics\s*(\[|\.get\()"
    ),
    "SQL selecting metrics from steps": re.compile(
        r"(?is)select\b[^;\"']*?\bmetrics\b[^;\"']*?\bfrom\s+steps\b"
    ),
}


def raw_accesses(text: str) -> list[str]:
    return [name for name, pattern in RAW_ACCESS.items() if pattern.search(text)]


def test_the_grep_finds_each_kind_of_raw_access() -> None:
    samples = [
        "SELECT step, metrics->>'compute_dtype' FROM steps",
        'extra = m.get("metrics") or {}',
        'wall = r["metrics"]["wall_s"]',
        "select(Step.step, Step.metrics).where(Step.run_id == run)",
        'start = previous.metrics.get("window_end_unix")',
        'SQL = "SELECT policy_lag_mean, groups_stale, metrics FROM steps WHERE run_id = :run"',
    ]
    assert [bool(raw_accesses(s)) for s in samples] == [True] * len(samples)
    assert raw_accesses("row.metrics = record.metrics_json()") == []
    assert raw_accesses('result.metrics["loss"]') == []  # a grpo.StepResult, not a steps row


def test_no_raw_steps_metrics_access_outside_the_record_module() -> None:
    found = []
    for path in sorted([*(ROOT / "services").rglob("*.py"), *(ROOT / "shared").rglob("*.py")]):
        if path == RECORD_MODULE:
            continue
        in_file = [
            f"{path.relative_to(ROOT)}:{number}: {', '.join(kinds)}: {line.strip()}"
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if (kinds := raw_accesses(line))
        ]
        if not in_file and (kinds := raw_accesses(path.read_text())):  # a query over several lines
            in_file.append(f"{path.relative_to(ROOT)}: {', '.join(kinds)} (over several lines)")
        found += in_file
    assert not found, "read steps.metrics through shared/step_record.StepRecord:\n" + "\n".join(found)
