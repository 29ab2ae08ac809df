"""The rollout's patch: a binary-safe ``git diff`` of the workspace against the task's ``base_commit``.

New files count (the agent's work is often a new file), so the diff is taken from a throwaway index that holds
the whole worktree; the workspace's own index and HEAD are left alone, whatever the agent did to them (it may
have committed, switched branches or staged half a change). What harnesses and tools leave behind (their config
dirs, ``node_modules``, bytecode caches) is excluded; files the repository's ``.gitignore`` ignores stay out too.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from shared.scratch import scratch_prefix
from shared.tasks import git_env

EXCLUDED_DIRS = (".codex", ".claude", ".qwen", ".pi", "node_modules", "__pycache__", ".pytest_cache")
EXCLUDED_FILES = ("*.pyc",)


class PatchError(RuntimeError):
    """The workspace could not be diffed (not a git checkout, or the base commit is missing)."""


def _pathspec() -> list[str]:
    dirs = [f":(exclude,glob)**/{name}/**" for name in EXCLUDED_DIRS]
    files = [f":(exclude,glob)**/{pattern}" for pattern in EXCLUDED_FILES]
    return ["--", ".", *dirs, *files]


def _git(workspace: Path, index: Path, *args: str) -> bytes:
    env = git_env() | {"GIT_INDEX_FILE": str(index)}
    argv = ["git", "-c", "safe.directory=*", "-c", "core.autocrlf=false", "-c", "core.quotepath=off", *args]
    proc = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, timeout=300, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        raise PatchError(f"git {args[0]} in {workspace} failed ({proc.returncode}): {stderr[-1000:]}")
    return proc.stdout


def workspace_patch(workspace: Path, base_commit: str) -> bytes:
    """The diff from ``base_commit`` to the workspace's files, as bytes (``git apply`` takes it back)."""
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("patch")) as tmp:
        index = Path(tmp) / "index"
        _git(workspace, index, "read-tree", base_commit)
        _git(workspace, index, "add", "--all", *_pathspec())
        return _git(
            workspace, index, "diff", "--cached", "--binary", "--full-index", "--no-color", "--no-ext-diff",
            "--no-renames", base_commit, *_pathspec(),
        )  # fmt: skip
