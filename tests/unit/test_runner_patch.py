"""The rollout patch: every change against base_commit (new, binary, committed by the agent), none of the
harness litter, and it applies back onto a fresh checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from services.runner.patch import PatchError, workspace_patch
from shared.tasks import commit_tree, run_git

pytestmark = pytest.mark.unit


def checkout(root: Path) -> tuple[Path, str]:
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "old.txt").write_text("to be deleted\n")
    return root, commit_tree(root)


def test_patch_carries_every_change_and_applies_back(tmp_path: Path) -> None:
    work, base = checkout(tmp_path / "work")
    (work / "a.py").write_text("x = 2\n")
    (work / "old.txt").unlink()
    (work / "pkg").mkdir()
    (work / "pkg" / "new.py").write_text("y = 3\n")
    (work / "blob.bin").write_bytes(bytes(range(256)) * 4)
    run_git(work, "add", "-A")
    run_git(work, "commit", "-q", "-m", "agent committed")  # committing must not hide the change
    (work / "late.txt").write_text("after the commit\n")
    for litter in (
        ".codex/sessions/x.json",
        ".qwen/settings.json",
        "node_modules/m/i.js",
        "pkg/__pycache__/n.pyc",
    ):
        (work / litter).parent.mkdir(parents=True, exist_ok=True)
        (work / litter).write_text("litter")

    patch = workspace_patch(work, base)

    for path in ("a.py", "old.txt", "pkg/new.py", "blob.bin", "late.txt"):
        assert f"diff --git a/{path} b/{path}".encode() in patch
    for litter in (b".codex", b".qwen", b"node_modules", b"__pycache__"):
        assert litter not in patch
    assert b"GIT binary patch" in patch

    fresh, _ = checkout(tmp_path / "fresh")
    subprocess.run(["git", "apply", "--binary", "-"], cwd=fresh, input=patch, check=True)
    assert (fresh / "a.py").read_text() == "x = 2\n"
    assert not (fresh / "old.txt").exists()
    assert (fresh / "blob.bin").read_bytes() == (work / "blob.bin").read_bytes()
    assert (fresh / "late.txt").read_text() == "after the commit\n"


def test_untouched_workspace_gives_an_empty_patch(tmp_path: Path) -> None:
    work, base = checkout(tmp_path / "work")
    assert workspace_patch(work, base) == b""
    assert run_git(work, "status", "--porcelain") == b""  # the workspace's own index is left alone


def test_unknown_base_commit_is_a_clear_error(tmp_path: Path) -> None:
    work, _ = checkout(tmp_path / "work")
    with pytest.raises(PatchError, match="read-tree"):
        workspace_patch(work, "0" * 40)
