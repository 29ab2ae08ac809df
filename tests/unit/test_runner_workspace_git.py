"""The patch step reads the workspace's files as data and its ``.git`` not at all (``services/runner/patch.py``):
whatever an agent writes into ``.git/config``, hooks or attributes runs nothing on the host and reads nothing
outside the workspace; special, huge and nested-repository entries refuse the patch with a reason."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from services.runner.patch import PatchRefused, snapshot_base, workspace_patch
from shared.tasks import commit_tree

pytestmark = pytest.mark.unit


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, str, Path]:
    """(workspace, base commit, the runner's snapshot of its objects taken before the 'agent' ran)."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("*.log\n")
    base = commit_tree(root)
    return root, base, snapshot_base(root, tmp_path / "runner" / "base.git")


def test_agent_git_config_hooks_and_filters_run_nothing(work, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    marker = tmp_path / "marker"
    script = root / "evil.sh"
    script.write_text(f"#!/bin/sh\nid > {marker}\ncat\n")
    script.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("TOPSECRET\n")
    with open(root / ".git" / "config", "a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {script}\n\thooksPath = {root}\n\tworktree = {elsewhere}\n"
            f'[filter "evil"]\n\tclean = {script}\n\tsmudge = {script}\n\trequired = true\n'
            f'[diff "evil"]\n\ttextconv = {script}\n\tcommand = {script}\n[include]\n\tpath = {elsewhere}/x\n'
        )
    (root / "pre-commit").write_text(f"#!/bin/sh\nid > {marker}\n")
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (root / "a.py").write_text("x = 2\n")

    patch = workspace_patch(root, base, git_dir)

    assert not marker.exists()
    assert b"TOPSECRET" not in patch and b"secret.txt" not in patch
    assert b"+x = 2" in patch


def test_deleted_git_dir_still_diffs(work) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    (root / "a.py").write_text("x = 3\n")
    patch = workspace_patch(root, base, git_dir)
    assert b"+x = 3" in patch and b".git/" not in patch


def test_symlinks_stay_links(work, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    secret = tmp_path / "root-only"
    secret.write_text("ROOTSECRET\n")
    secret.chmod(0o600)
    os.symlink(secret, root / "leak")
    os.symlink("/etc/shadow", root / "shadow")
    (root / "dir").symlink_to(tmp_path)
    (root / ".gitattributes").symlink_to(secret)
    patch = workspace_patch(root, base, git_dir)
    assert b"ROOTSECRET" not in patch and b"root:" not in patch
    assert str(secret).encode() in patch and b"/etc/shadow" in patch


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda r: os.mkfifo(r / "pipe"), "pipe: a fifo"),
        (
            lambda r: (r / "sub").mkdir() or (r / "sub" / ".git").write_text("gitdir: /etc\n"),
            "sub/.git: a nested",
        ),
        (
            lambda r: subprocess.run(["git", "init", "-q", str(r / "inner")], check=True),
            "inner/.git: a nested",
        ),
        (
            lambda r: os.truncate(os.open(r / "big.bin", os.O_CREAT | os.O_WRONLY), 40 << 20),
            "big.bin: 41943040 bytes",
        ),
        (lambda r: (r / ".GIT").mkdir(), ".GIT: a nested"),
    ],
)
def test_what_git_must_not_touch_refuses_the_patch(work, make, reason) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    make(root)
    with pytest.raises(PatchRefused, match=reason.replace(".", r"\.")):
        workspace_patch(root, base, git_dir)


def test_ignored_and_excluded_files_do_not_count_against_the_caps(work) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    os.truncate(os.open(root / "huge.log", os.O_CREAT | os.O_WRONLY), 40 << 20)  # ignored by .gitignore
    (root / "node_modules").mkdir()
    os.truncate(os.open(root / "node_modules" / "x.bin", os.O_CREAT | os.O_WRONLY), 40 << 20)
    (root / "new.py").write_text("y = 1\n")
    patch = workspace_patch(root, base, git_dir)
    assert b"new.py" in patch and b"huge.log" not in patch and b"node_modules" not in patch


def test_total_cap(work) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    for i in range(3):
        (root / f"f{i}.txt").write_bytes(b"z" * 1000)
    with pytest.raises(PatchRefused, match="more than 2500 bytes"):
        workspace_patch(root, base, git_dir, max_changed_bytes=2500)


def test_a_tree_too_deep_to_walk_is_refused_not_a_crash(work) -> None:  # type: ignore[no-untyped-def]
    root, base, git_dir = work
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(400):  # each name 250 bytes: the path passes PATH_MAX long before the end
            os.mkdir("d" * 250, dir_fd=fd)
            inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    with pytest.raises(PatchRefused, match="cannot be walked"):
        workspace_patch(root, base, git_dir)
