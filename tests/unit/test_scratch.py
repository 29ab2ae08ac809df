"""Scratch folders carry their owner's pid; the sweep removes only those whose owner is gone."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from shared.scratch import scratch_prefix, sweep_dead_scratch

pytestmark = pytest.mark.unit


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_only_dead_owners_folders_are_removed(tmp_path: Path) -> None:
    dead = dead_pid()
    gone = [tmp_path / f"harnessrl-{kind}-{dead}-x1" for kind in ("grade", "sandbox", "patch")]
    for path in gone:
        (path / "repo" / "deep").mkdir(parents=True)
        (path / "repo" / "deep" / "file").write_text("left behind")
    mine = Path(tempfile.mkdtemp(prefix=scratch_prefix("grade"), dir=tmp_path))
    legacy = tmp_path / "harnessrl-grade-abc123"  # no pid: not ours to judge
    other = tmp_path / f"unrelated-{dead}-dir"
    not_a_dir = tmp_path / f"harnessrl-patch-{dead}-file"
    for path in (legacy, other):
        path.mkdir()
    not_a_dir.write_text("")
    removed = sweep_dead_scratch(tmp_path)
    assert sorted(removed) == sorted(gone)
    assert not any(p.exists() for p in gone)
    assert mine.is_dir() and legacy.is_dir() and other.is_dir() and not_a_dir.is_file()
    assert sweep_dead_scratch(tmp_path) == []
    assert sweep_dead_scratch(tmp_path / "absent") == []


def test_prefix_names_this_process() -> None:
    import os

    assert scratch_prefix("sandbox") == f"harnessrl-sandbox-{os.getpid()}-"
    with pytest.raises(ValueError, match="unknown scratch kind"):
        scratch_prefix("cache")
