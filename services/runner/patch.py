"""The rollout's patch: a binary-safe ``git diff`` of the workspace against the task's ``base_commit``, computed on
the host by the runner (``rollout.py: execute_attempt``) without ever trusting the workspace's git.

The workspace's ``.git`` is data the agent could rewrite, never configuration: its ``config`` (``core.fsmonitor``,
``core.worktree``, filter and diff drivers, includes), hooks, ``info/`` and objects are read by no git command the
runner runs. Before the harness starts, ``snapshot_base`` copies the fresh checkout's objects (nothing else) into a
git directory of the runner's own, outside anything bound into the sandbox. The patch is then taken with that git
directory and the workspace as the work tree, from an environment of nothing but our settings: no system, global
or repository config we did not write, hooks and fsmonitor off, no external diff or textconv, and a throwaway
index holding the base tree. The work tree's ``.gitattributes`` is still read by git; with no driver configured
it can only shape the bytes of the agent's own diff (line endings, encodings), never run anything.

Before git touches the tree, ``inspect_workspace`` walks it with ``lstat`` (nothing followed) and refuses
(``PatchRefused``, the agent's outcome) what would make git read outside it or blow the host's memory or disk: a
special file (fifo, socket, device), a nested ``.git`` (a ``gitdir:`` file or a repository git would look into),
too many entries, a changed file over ``MAX_FILE_BYTES``, more than ``MAX_CHANGED_BYTES`` in all. Symlinks stay
links: the patch holds their target text, never the target's content.

New files count (the agent's work is often a new file); what harnesses and tools leave behind (their config dirs,
``node_modules``, bytecode caches) is excluded; files the repository's ``.gitignore`` ignores stay out too (the
agent can edit ``.gitignore``: it only selects files inside the workspace).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from shared.scratch import scratch_prefix

EXCLUDED_DIRS = (".codex", ".claude", ".qwen", ".pi", "node_modules", "__pycache__", ".pytest_cache")
EXCLUDED_FILES = ("*.pyc",)

# Walls of the host-side diff. A changed or new file larger than this refuses the patch (tracked files whose size
# is unchanged are bounded by the repository itself); so does more changed content than that in all, or a tree of
# more entries than git should be asked to walk. Each sandboxed file is already under the sandbox's file-size limit.
MAX_FILE_BYTES = 32 * 1024**2
MAX_CHANGED_BYTES = 128 * 1024**2
MAX_ENTRIES = 500_000
MAX_PATCH_BYTES = 256 * 1024**2
# Files of the work tree git itself parses (in memory, whatever their size) while it diffs.
GIT_READS = (".gitignore", ".gitattributes")
MAX_GIT_READS_BYTES = 1024**2
GIT_TIMEOUT_S = 300.0

# Every git the runner runs on a workspace gets these, whatever config files exist: nothing executes, nothing is
# read from the agent's side but the work tree's files.
_SAFE_CONFIG = (
    "core.bare=false", f"core.hooksPath={os.devnull}", "core.fsmonitor=false", "core.untrackedCache=false",
    f"core.attributesFile={os.devnull}", f"core.excludesFile={os.devnull}", "core.autocrlf=false",
    "core.safecrlf=false", "core.quotepath=off", "core.symlinks=true", "core.splitIndex=false",
    "core.preloadIndex=false", "index.sparse=false", "gc.auto=0", "submodule.recurse=false",
    "protocol.allow=never", "safe.directory=*",
)  # fmt: skip


class PatchError(RuntimeError):
    """Our side could not diff the workspace (the runner's git directory is missing or broken): an infrastructure
    failure of the attempt."""


class PatchRefused(RuntimeError):  # noqa: N818 - a verdict on the agent's files, not a crash
    """What the agent left in its workspace cannot be diffed safely (``reason`` says what and where): the rollout's
    outcome, reward 0, never retried."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    """One path of the work tree, as ``lstat`` saw it."""

    kind: str  # "file" | "link" | "dir"
    size_bytes: int


def _pathspec() -> list[str]:
    dirs = [f":(exclude,glob)**/{name}/**" for name in EXCLUDED_DIRS]
    files = [f":(exclude,glob)**/{pattern}" for pattern in EXCLUDED_FILES]
    return ["--", ".", *dirs, *files]


def _excluded(relative: str) -> bool:
    """The pathspec's exclusions, in Python: a path under an excluded directory, or an excluded file name."""
    parts = relative.split("/")
    return any(p in EXCLUDED_DIRS for p in parts[:-1]) or any(fnmatch(parts[-1], f) for f in EXCLUDED_FILES)


def _env(git_dir: Path, workspace: Path, index: Path, home: Path) -> dict[str, str]:
    """The whole environment of a workspace git: built from nothing (the runner's credentials stay out), no config
    file but the runner's git directory's own."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": str(workspace),
        "GIT_INDEX_FILE": str(index),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_LITERAL_PATHSPECS": "0",
    }


def _git(git_dir: Path, workspace: Path, scratch: Path, *args: str, refuse_on_failure: bool = False) -> bytes:
    """``git <args>`` with the runner's git directory and ``workspace`` as the work tree. A failure is ours
    (``PatchError``), or the agent's files' (``PatchRefused``) when ``refuse_on_failure``."""
    argv = ["git"]
    for item in _SAFE_CONFIG:
        argv += ["-c", item]
    env = _env(git_dir, workspace, scratch / "index", scratch / "home")
    try:
        proc = subprocess.run(
            [*argv, *args], cwd=workspace, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        why = f"git {args[0]} on the workspace took over {GIT_TIMEOUT_S:.0f} s"
        raise (PatchRefused(why) if refuse_on_failure else PatchError(why)) from None
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()[-1000:]
        if refuse_on_failure:
            raise PatchRefused(f"git {args[0]} refused the workspace's files: {stderr}")
        raise PatchError(f"git {args[0]} for {workspace} failed ({proc.returncode}): {stderr}")
    return proc.stdout


def snapshot_base(workspace: Path, git_dir: Path) -> Path:
    """A git directory of the runner's own at ``git_dir`` holding the workspace's objects as they are now: call it
    right after materializing, before anything untrusted ran in the workspace. Only ``objects/`` is copied (never
    config, hooks, info or refs); the config is git's default for a fresh repository. Returns ``git_dir``."""
    source = workspace / ".git" / "objects"
    if not source.is_dir() or source.is_symlink():
        raise PatchError(f"{workspace} has no .git/objects to snapshot")
    git_dir.mkdir(parents=True, mode=0o700)
    git_dir.chmod(0o700)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("patch")) as tmp:
        scratch = Path(tmp)
        (scratch / "home").mkdir()
        env = {k: v for k, v in _env(git_dir, workspace, scratch / "index", scratch / "home").items()
               if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}  # fmt: skip
        init = ["git", "init", "-q", "--bare", "--template=", str(git_dir)]
        proc = subprocess.run(
            init, cwd=scratch, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
        if proc.returncode != 0:
            raise PatchError(
                f"git init {git_dir} failed: {proc.stderr.decode(errors='replace').strip()[-1000:]}"
            )
        shutil.rmtree(git_dir / "objects")
        shutil.copytree(source, git_dir / "objects", symlinks=True)
        (git_dir / "objects" / "info" / "alternates").unlink(missing_ok=True)
    return git_dir


def inspect_workspace(workspace: Path, max_entries: int = MAX_ENTRIES) -> dict[str, Entry]:
    """Every path under ``workspace`` (its top-level ``.git`` left unread), from ``lstat`` alone: nothing is
    followed or opened. ``PatchRefused`` for a special file, a nested ``.git``, more than ``max_entries``, or a
    tree that cannot be walked (names too long, too deep): the agent made it so, and retrying would not help."""
    try:
        return _walk(workspace, max_entries)
    except OSError as exc:
        raise PatchRefused(f"the workspace cannot be walked: {exc.strerror} ({exc.filename})") from None


def _walk(workspace: Path, max_entries: int) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    stack = [""]
    while stack:
        relative_dir = stack.pop()
        with os.scandir(workspace / relative_dir if relative_dir else workspace) as it:
            for item in it:
                relative = f"{relative_dir}/{item.name}" if relative_dir else item.name
                if relative == ".git":
                    continue  # the agent's repository: never read, never part of the tree git sees
                if item.name.lower() == ".git":
                    raise PatchRefused(
                        f"{relative}: a nested .git (a repository or a gitdir file) in the workspace; git would "
                        "read it, and what it points to, outside the workspace"
                    )
                st = item.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    entries[relative] = Entry("link", st.st_size)
                elif stat.S_ISDIR(st.st_mode):
                    entries[relative] = Entry("dir", 0)
                    stack.append(relative)
                elif stat.S_ISREG(st.st_mode):
                    if item.name in GIT_READS and st.st_size > MAX_GIT_READS_BYTES:
                        raise PatchRefused(
                            f"{relative}: {st.st_size} bytes, over the limit of {MAX_GIT_READS_BYTES} bytes for a "
                            "file git itself reads"
                        )
                    entries[relative] = Entry("file", st.st_size)
                else:
                    kind = _special_kind(st.st_mode)
                    raise PatchRefused(
                        f"{relative}: a {kind} in the workspace (only files, links and directories)"
                    )
                if len(entries) > max_entries:
                    raise PatchRefused(f"the workspace holds more than {max_entries} entries")
    return entries


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device file"
    return "special file"


def _split_z(output: bytes) -> list[str]:
    return [os.fsdecode(p) for p in output.split(b"\0") if p]


def _check_sizes(
    entries: dict[str, Entry], base_sizes: dict[str, int], untracked: list[str], max_file_bytes: int,
    max_changed_bytes: int,
) -> None:  # fmt: skip
    """Refuse before hashing: a new or resized file over ``max_file_bytes``, or more than ``max_changed_bytes``."""
    total = 0
    candidates = [p for p in base_sizes if not _excluded(p)] + untracked
    for relative in candidates:
        entry = entries.get(relative)
        if entry is None or entry.kind != "file":
            continue  # deleted, or a link (its text is small), or a directory where a file was
        if relative in base_sizes and base_sizes[relative] == entry.size_bytes:
            continue  # tracked and the same size: bounded by the repository itself
        if entry.size_bytes > max_file_bytes:
            raise PatchRefused(
                f"{relative}: {entry.size_bytes} bytes, over the patch's limit of {max_file_bytes} bytes per file"
            )
        total += entry.size_bytes
        if total > max_changed_bytes:
            raise PatchRefused(
                f"more than {max_changed_bytes} bytes of new or changed files in the workspace"
            )


def workspace_patch(
    workspace: Path,
    base_commit: str,
    git_dir: Path | None = None,
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_changed_bytes: int = MAX_CHANGED_BYTES,
    max_patch_bytes: int = MAX_PATCH_BYTES,
) -> bytes:
    """The diff from ``base_commit`` to the workspace's files, as bytes (``git apply`` takes it back).

    ``git_dir``: the runner's snapshot of the base (``snapshot_base``), taken before the harness ran; the runner
    always passes it. Without it one is taken now from the workspace's objects, which is only right for a
    workspace no untrusted process has touched. ``PatchRefused``: the agent's files cannot be diffed safely;
    ``PatchError``: ours failed."""
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("patch")) as tmp:
        scratch = Path(tmp)
        (scratch / "home").mkdir()
        if git_dir is None:
            git_dir = snapshot_base(workspace, scratch / "base.git")
        entries = inspect_workspace(workspace)
        _git(git_dir, workspace, scratch, "read-tree", base_commit)
        listing = _git(git_dir, workspace, scratch, "ls-tree", "-r", "-z", "--full-tree", "-l", base_commit)
        base_sizes: dict[str, int] = {}
        for record in listing.split(b"\0"):
            if record:
                meta, _, path = record.partition(b"\t")
                size = meta.split()[-1]
                base_sizes[os.fsdecode(path)] = int(size) if size.isdigit() else -1
        untracked = _split_z(
            _git(git_dir, workspace, scratch, "ls-files", "-z", "--others", "--exclude-standard", *_pathspec(),
                 refuse_on_failure=True)
        )  # fmt: skip
        _check_sizes(entries, base_sizes, untracked, max_file_bytes, max_changed_bytes)
        _git(git_dir, workspace, scratch, "add", "--all", *_pathspec(), refuse_on_failure=True)
        patch = _git(
            git_dir, workspace, scratch, "diff", "--cached", "--binary", "--full-index", "--no-color",
            "--no-ext-diff", "--no-textconv", "--no-renames", base_commit, *_pathspec(),
        )  # fmt: skip
        if len(patch) > max_patch_bytes:
            raise PatchRefused(f"the patch is {len(patch)} bytes, over its limit of {max_patch_bytes} bytes")
        return patch
