"""Tasks: the task format (SWE-bench field names), the JSONL loader, and repository materialization.

A task is data. ``Task`` keeps SWE-bench's names (``instance_id``, ``repo``, ``base_commit``,
``problem_statement``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``test_patch``) and adds what running it needs:
where the repository comes from (``source``), the test command, setup commands, time limits and the paths the
agent must not change (``protected_paths``; the grader restores them, and every file ``test_patch`` touches).

Repository sources (``source.kind``):
- ``dir``: a plain directory of files (no ``.git``). A git repository is created from it deterministically
  (fixed author, committer and dates, no user or system git config), so the same files always give the same
  ``base_commit``. Bundled datasets use this. A relative path is resolved against the task file's folder.
- ``git``: a git URL or path (``file://``, a local path, or an ``https``/``http``/``git``/``ssh`` URL); checked
  out at ``base_commit``. A row without ``source`` (a plain SWE-bench row) gets ``https://github.com/<repo>.git``.
  Remote helpers (``ext::``, any ``<transport>::``), other schemes and a URL git would read as an option are
  refused (``git_url_refusal``).
- ``store``: a ``.tar.gz`` in the object store (``tasks/<dataset>/<instance_id>.tar.gz``); either a repository
  (with ``.git``) or plain files committed deterministically like ``dir``.

Host paths are data too: the runner and the grader run as root and hand the checkout to the sandbox user, so a
``dir`` source is copied by ``shared/host_paths.py: copy_readable_tree`` (nothing followed, a file the sandbox user
could not read refuses the task) and a local git repository must be readable by that user throughout. Tasks from
REST clients may name host paths only under the operator's allow-list (``services/api/task_sources.py``).

``materialize(task, dest, store)`` leaves ``dest`` a git checkout whose HEAD is ``base_commit`` and refuses
(``TaskRepoError``) when the source yields another commit, so an agent never works on the wrong code. The runner
and the grader both call it; neither imports the other. The runner then calls ``hide_future_history``: a clone
of a real repository holds the commits after ``base_commit`` (other branches, tags, the reflog, packed objects),
which is where SWE-bench's reference fix lives — an agent must find none of it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.host_paths import HostPathRefused, copy_readable_tree
from shared.objectstore import ObjectStore

JUNIT_PLACEHOLDER = "{junit_xml}"
DEFAULT_TEST_COMMAND = f"python -m pytest -p no:cacheprovider -q --junitxml={JUNIT_PLACEHOLDER}"

# Fixed identity and dates: the commit made from a ``dir`` or plain-tarball source depends only on its files.
_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "harnessrl",
    "GIT_AUTHOR_EMAIL": "tasks@harnessrl",
    "GIT_COMMITTER_NAME": "harnessrl",
    "GIT_COMMITTER_EMAIL": "tasks@harnessrl",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
_BASE_COMMIT_MESSAGE = "base"
_IGNORED_WHEN_COPYING = ("__pycache__", "*.pyc", ".pytest_cache", ".git")


class TaskError(ValueError):
    """Base class of task problems."""


class TaskFileError(TaskError):
    """A task file line is invalid; the message names the file, the line and the field."""


class TaskRepoError(TaskError):
    """The repository could not be materialized at the task's base commit."""


class GitError(RuntimeError):
    """A git command failed; the message carries its stderr."""


# --- the task format -------------------------------------------------------------------------------------


class DirSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["dir"]
    path: str = Field(min_length=1, description="Directory of plain files; relative to the task file.")


class GitSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["git"]
    url: str = Field(min_length=1, description="Anything `git clone` accepts: file://, a path, a URL.")


class StoreSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["store"]
    key: str = Field(min_length=1, description="Object-store key of a .tar.gz of the repository.")


RepoSource = Annotated[DirSource | GitSource | StoreSource, Field(discriminator="kind")]


class Task(BaseModel):
    """One task instance. Field names follow SWE-bench; the extras say how to run it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    instance_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=200)
    repo: str = Field(min_length=1, description="Human name of the repository, e.g. 'owner/name'.")
    source: RepoSource
    base_commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    problem_statement: str = Field(min_length=1)
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    test_patch: str = ""
    test_command: str = DEFAULT_TEST_COMMAND
    setup_commands: list[str] = Field(default_factory=list)
    agent_timeout_s: float | None = Field(
        default=None, gt=0, description="Harness wall clock (else settings)."
    )
    test_timeout_s: float | None = Field(
        default=None, gt=0, description="Test-run wall clock (else settings)."
    )
    protected_paths: list[str] = Field(
        default_factory=list, description="Paths restored to base_commit before grading (e.g. 'tests')."
    )
    # SWE-bench columns we carry but do not use. ``patch`` is SWE-bench's gold solution: kept for evaluation
    # tooling, never given to an agent (the runner hands over ``problem_statement`` only).
    patch: str = ""
    hints_text: str = ""
    version: str = ""
    created_at: str = ""
    environment_setup_commit: str = ""

    @model_validator(mode="before")
    @classmethod
    def _default_source(cls, data: Any) -> Any:
        # A SWE-bench row names only ``repo`` ("owner/name"): clone it from GitHub unless a source is given.
        is_plain_row = isinstance(data, dict) and "source" not in data and isinstance(data.get("repo"), str)
        if is_plain_row and re.fullmatch(r"[\w.-]+/[\w.-]+", data["repo"]):
            return {**data, "source": {"kind": "git", "url": f"https://github.com/{data['repo']}.git"}}
        return data

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _decode_json_list(cls, value: Any) -> Any:
        # SWE-bench ships these lists as JSON-encoded strings.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("expected a list of test ids or a JSON-encoded list") from None
        return value

    @field_validator("test_command")
    @classmethod
    def _check_test_command(cls, value: str) -> str:
        if JUNIT_PLACEHOLDER not in value:
            raise ValueError(f"must contain {JUNIT_PLACEHOLDER} (where the test runner writes junit XML)")
        return value

    @field_validator("protected_paths")
    @classmethod
    def _check_relative_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path or path.startswith("/") or ".." in Path(path).parts:
                raise ValueError(f"{path!r} must be a relative path inside the repository")
        return value

    @model_validator(mode="after")
    def _check_test_lists_disjoint(self) -> Task:
        both = set(self.FAIL_TO_PASS) & set(self.PASS_TO_PASS)
        if both:
            raise ValueError(f"tests in both FAIL_TO_PASS and PASS_TO_PASS: {sorted(both)}")
        return self

    def with_source(self, source: DirSource | GitSource | StoreSource) -> Task:
        return self.model_copy(update={"source": source})

    def test_patch_paths(self) -> list[str]:
        """Files the test patch touches (restored and then patched by the grader)."""
        return patch_paths(self.test_patch)


# --- loading ---------------------------------------------------------------------------------------------


def parse_task(data: Any, base_dir: Path | None = None) -> Task:
    """Validate one task object; a relative ``dir`` source is made absolute against ``base_dir``."""
    task = Task.model_validate(data)
    if (
        isinstance(task.source, DirSource)
        and base_dir is not None
        and not Path(task.source.path).is_absolute()
    ):
        task = task.with_source(DirSource(kind="dir", path=str((base_dir / task.source.path).resolve())))
    return task


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(task)"
    return f"field {field}: {first['msg'].removeprefix('Value error, ')}"


def load_tasks(path: Path | str) -> list[Task]:
    """Read a JSONL task file (one task per line; blank lines allowed).

    The whole file is checked before anything is returned: the first bad line raises ``TaskFileError`` naming
    ``<file>:<line>`` and the field at fault; a duplicated ``instance_id`` names both lines.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"{path}: no such task file") from None
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(
                f"{path}:{line_no}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(data, dict):
            raise TaskFileError(f"{path}:{line_no}: expected a JSON object, got {type(data).__name__}")
        try:
            task = parse_task(data, base_dir=path.parent)
        except ValidationError as exc:
            raise TaskFileError(f"{path}:{line_no}: {_describe(exc)}") from None
        if task.instance_id in first_line:
            raise TaskFileError(
                f"{path}:{line_no}: field instance_id: {task.instance_id!r} already on line "
                f"{first_line[task.instance_id]}"
            )
        first_line[task.instance_id] = line_no
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"{path}: no tasks")
    return tasks


# --- git -------------------------------------------------------------------------------------------------


def git_env() -> dict[str, str]:
    """Environment for git: no user/system config (hooks, templates, signing), fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_COMMIT_ENV)
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"})
    return env


def run_git(
    cwd: Path,
    *args: str,
    input_bytes: bytes | None = None,
    timeout_s: float = 300.0,
    extra_env: dict[str, str] | None = None,
) -> bytes:
    """Run ``git <args>`` in ``cwd`` and return stdout; ``GitError`` with stderr on failure. ``extra_env``: more
    ``GIT_*`` variables (e.g. ``GIT_ALLOW_PROTOCOL`` for a clone).

    ``safe.directory=*``: workspaces belong to the sandbox uid, and git refuses other users' repos otherwise.
    """
    argv = [
        "git", "-c", "safe.directory=*", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false",
        "-c", f"core.excludesFile={os.devnull}", "-c", f"core.hooksPath={os.devnull}", *args,
    ]  # fmt: skip
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env={**git_env(), **(extra_env or {})},
        input=input_bytes,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args[:3])} failed ({proc.returncode}): {stderr[-2000:]}")
    return proc.stdout


def commit_tree(repo_dir: Path) -> str:
    """Make ``repo_dir`` (plain files) a git repository with one deterministic commit; returns its hash."""
    run_git(repo_dir, "init", "-q", "-b", "main")
    run_git(repo_dir, "add", "-A")
    run_git(repo_dir, "commit", "-q", "--allow-empty", "-m", _BASE_COMMIT_MESSAGE)
    return head_commit(repo_dir)


def head_commit(repo_dir: Path) -> str:
    return run_git(repo_dir, "rev-parse", "HEAD").decode().strip()


def patch_paths(patch: str) -> list[str]:
    """Paths a unified git diff touches (both sides of renames), in order of appearance."""
    paths: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("--- a/", "+++ b/")):
            candidate = line[6:].split("\t")[0]
        elif line.startswith(("rename from ", "rename to ")):
            candidate = line.split(" ", 2)[2]
        else:
            continue
        if candidate not in paths:
            paths.append(candidate)
    return paths


class PatchApplyError(ValueError):
    """A diff that does not apply to the files given (the message names the file and the hunk)."""


HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(files: dict[str, str], patch: str) -> dict[str, str]:
    """The text of every file a unified git diff changes, after it, given each one's text before (``files``; a file
    the diff creates needs none). Exact like ``git apply`` without fuzz: every context and removed line must match.
    Deletions, renames and binary diffs are refused (``PatchApplyError``), as is a file ``files`` lacks."""
    out: dict[str, str] = {}
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        if not section.startswith("diff --git "):
            continue
        lines = section.splitlines(keepends=True)
        old = next((ln[4:].rstrip("\n") for ln in lines if ln.startswith("--- ")), None)
        new = next((ln[4:].rstrip("\n") for ln in lines if ln.startswith("+++ ")), None)
        if old is None or new is None or any(ln.startswith(("rename ", "Binary files")) for ln in lines):
            raise PatchApplyError(f"not a text diff of one file: {lines[0].strip()}")
        if new == "/dev/null":
            raise PatchApplyError(f"{old}: deletes the file")
        path = new.removeprefix("b/").split("\t")[0]
        if old == "/dev/null":
            before: list[str] = []
        elif path in files:
            before = files[path].splitlines(keepends=True)
        else:
            raise PatchApplyError(f"{path}: no text given for a file the diff changes")
        out[path] = "".join(_apply_hunks(path, before, lines))
    return out


def _apply_hunks(path: str, before: list[str], lines: list[str]) -> list[str]:
    after: list[str] = []
    cursor = 0  # the next line of ``before`` not yet copied
    previous: str | None = None  # the kind of the last hunk line (None: still in the file's header)
    for line in lines:
        if header := HUNK_HEADER.match(line):
            start = int(header.group(1)) - (0 if header.group(2) == "0" else 1)
            if start < cursor or start > len(before):
                raise PatchApplyError(f"{path}: hunk {line.strip()} out of order or past the end")
            after.extend(before[cursor:start])
            cursor, previous = start, "@"
        elif previous is None:
            continue  # the file header: diff --git, index, ---, +++
        elif line.startswith("\\"):  # "\ No newline at end of file" for the line above
            if previous in (" ", "+") and after[-1].endswith("\n"):
                after[-1] = after[-1][:-1]
        elif line[:1] in (" ", "-", "+"):
            kind, body = line[:1], line[1:]
            if kind == "+":
                after.append(body)
            else:
                if cursor >= len(before) or before[cursor].rstrip("\n") != body.rstrip("\n"):
                    raise PatchApplyError(f"{path}: line {cursor + 1} does not match the diff's context")
                if kind == " ":
                    after.append(before[cursor])
                cursor += 1
            previous = kind
        else:
            raise PatchApplyError(f"{path}: not a hunk line: {line.rstrip()!r}")
    after.extend(before[cursor:])
    return after


# --- materialization -------------------------------------------------------------------------------------


def copy_source_files(source_dir: Path, dest: Path, reader_uid: int | None = None) -> None:
    """Copy a ``dir`` source's files (caches and any ``.git`` left out) into ``dest``: symlinks as links, and only
    what the sandbox user ``reader_uid`` could read (``TaskRepoError`` naming the first file it could not; see
    ``shared/host_paths.py: copy_readable_tree``)."""
    try:
        copy_readable_tree(
            source_dir, dest, reader_uid=reader_uid, field="source.path", what="source directory",
            skip=_IGNORED_WHEN_COPYING,
        )  # fmt: skip
    except HostPathRefused as exc:
        raise TaskRepoError(exc.message) from None


# Transports a ``git`` source may use; ``file`` covers local paths. Everything else (``ext``, ``fd``, remote helpers)
# is refused by ``git_url_refusal`` and, should one slip past it, by git itself (``GIT_ALLOW_PROTOCOL``).
GIT_PROTOCOLS = ("https", "http", "git", "ssh", "file")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def git_url_refusal(url: str) -> str | None:
    """Why a ``git`` source's URL is refused, or None."""
    if url.startswith("-"):
        return f"git URL {url!r} starts with '-' (git would read it as an option)"
    if any(ord(c) < 0x20 or c == "\x7f" for c in url):
        return f"git URL {url!r} holds a control character"
    if re.match(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::", url):
        return f"git URL {url!r} names a remote helper ('<transport>::'), which runs a program; refused"
    scheme = _SCHEME.match(url)
    if scheme and scheme.group(1).lower() not in GIT_PROTOCOLS:
        return f"git URL {url!r}: scheme {scheme.group(1)!r} is not one of {', '.join(GIT_PROTOCOLS)}"
    return None


def local_git_path(url: str) -> Path | None:
    """The host path a ``git`` source's URL names (``file://`` or a plain path, as git reads it), or None for a
    remote URL (a scheme, or ``host:path`` as ssh)."""
    scheme = _SCHEME.match(url)
    if scheme:
        if scheme.group(1).lower() != "file":
            return None
        parsed = urllib.parse.urlsplit(url)
        return Path(urllib.parse.unquote(parsed.path or "/"))
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return None  # scp-like 'host:path': ssh
    return Path(url)


def source_host_path(source: DirSource | GitSource | StoreSource) -> str | None:
    """The host path a task source reads (a ``dir`` source's folder, a local git repository), or None."""
    if isinstance(source, DirSource):
        return source.path
    if isinstance(source, GitSource):
        local = local_git_path(source.url)
        return str(local) if local is not None else None
    return None


def _clone(task: Task, source: GitSource, dest: Path, reader_uid: int | None) -> None:
    """Clone a ``git`` source into ``dest``: a refused URL is a ``TaskRepoError``; a local repository must be
    readable throughout by the sandbox user (nothing else of the host reaches the sandbox); only
    ``GIT_PROTOCOLS``; no hardlinks into the source's objects (the checkout is handed to the sandbox user)."""
    if why := git_url_refusal(source.url):
        raise TaskRepoError(f"{task.instance_id}: {why}")
    local = local_git_path(source.url)
    if local is not None:
        if not local.is_absolute():
            raise TaskRepoError(
                f"{task.instance_id}: local git repository {source.url!r} must be an absolute path"
            )
        try:  # checked, not copied: git reads it (a path that is not there: git says so)
            if os.path.lexists(local):
                copy_readable_tree(
                    local, None, reader_uid=reader_uid, field="source.url", what="git repository"
                )
        except HostPathRefused as exc:
            raise TaskRepoError(f"{task.instance_id}: {exc.message}") from None
    # GIT_ALLOW_PROTOCOL: the only transports git may use, for the clone and anything it starts.
    argv = ["clone", "-q", "--no-checkout", "--no-hardlinks", "--", source.url, "."]
    run_git(dest, *argv, extra_env={"GIT_ALLOW_PROTOCOL": ":".join(GIT_PROTOCOLS)})


def base_commit_of_dir(path: Path) -> str:
    """The commit a ``dir`` source yields (what a task file's ``base_commit`` must say)."""
    with tempfile.TemporaryDirectory(prefix="harnessrl-task-") as tmp:
        repo = Path(tmp) / "repo"
        copy_source_files(path, repo)
        return commit_tree(repo)


def _prepare_dest(dest: Path) -> None:
    if dest.exists() and any(dest.iterdir()):
        raise TaskRepoError(f"destination {dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)


def _extract_tarball(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        # The "data" filter refuses absolute paths, '..', device files and links that leave dest.
        tar.extractall(dest, filter="data")
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and entries[0].name != ".git":
        # A tarball with one top-level folder (the common `tar czf x.tgz repo/` layout): unwrap it.
        inner = entries[0]
        for child in list(inner.iterdir()):
            child.rename(dest / child.name)
        inner.rmdir()


def materialize(
    task: Task, dest: Path, store: ObjectStore | None = None, *, reader_uid: int | None = None
) -> Path:
    """Create a git checkout of the task's repository at ``base_commit`` in ``dest`` (empty or absent).

    ``reader_uid``: the sandbox user the checkout is for (``shared/host_paths.py: effective_reader_uid``; None as
    root: any unprivileged user); a ``dir`` source or local git repository holding what it could not read is a
    ``TaskRepoError`` naming the file."""
    dest = Path(dest)
    _prepare_dest(dest)
    source = task.source
    try:
        if isinstance(source, DirSource):
            if not Path(source.path).is_dir():
                raise TaskRepoError(f"{task.instance_id}: source directory {source.path} does not exist")
            try:
                copy_source_files(Path(source.path), dest, reader_uid)
            except TaskRepoError as exc:
                raise TaskRepoError(f"{task.instance_id}: {exc}") from None
            commit_tree(dest)
        elif isinstance(source, GitSource):
            _clone(task, source, dest, reader_uid)
            run_git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", task.base_commit)
        else:
            if store is None:
                raise TaskRepoError(
                    f"{task.instance_id}: source is in the object store but no store was given"
                )
            try:
                data = store.get_bytes(source.key)
            except KeyError:
                raise TaskRepoError(f"{task.instance_id}: no object {source.key!r} in the store") from None
            _extract_tarball(data, dest)
            if (dest / ".git").exists():
                run_git(
                    dest,
                    "-c",
                    "advice.detachedHead=false",
                    "checkout",
                    "-q",
                    "-f",
                    "--detach",
                    task.base_commit,
                )
                run_git(dest, "clean", "-q", "-fdx")
            else:
                commit_tree(dest)
    except GitError as exc:
        raise TaskRepoError(f"{task.instance_id}: {exc}") from None
    head = head_commit(dest)
    if head != task.base_commit:
        raise TaskRepoError(
            f"{task.instance_id}: source gives commit {head}, task says base_commit {task.base_commit}"
        )
    return dest


# What a clone or a tarball may carry that names or holds commits other than the checked-out history.
_HISTORY_FILES = ("packed-refs", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD",
                  "BISECT_LOG", "BISECT_START", "AUTO_MERGE", "shallow.lock")  # fmt: skip
_HISTORY_DIRS = ("refs", "logs", "rr-cache", "worktrees", "rebase-merge", "rebase-apply")
_OBJECT_INDEXES = ("info/commit-graph", "info/commit-graphs", "info/packs", "pack/multi-pack-index")


def hide_future_history(repo: Path, base_commit: str) -> None:
    """Leave ``repo`` holding only ``base_commit`` and its ancestors: no other ref, tag, stash, remote, reflog,
    or object (loose or packed) that is not reachable from it. The branch HEAD named, if any, is kept, at
    ``base_commit``. Every way git reaches an object (``log --all``, ``fsck --lost-found``, ``cat-file
    --batch-all-objects``, reading ``.git`` directly) then finds nothing newer than the task's base."""
    git_dir = repo / ".git"
    head = (git_dir / "HEAD").read_text().strip()
    branch = head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None
    for remote in run_git(repo, "remote").decode().split():
        run_git(repo, "remote", "remove", remote)
    run_git(repo, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", base_commit)
    for name in _HISTORY_FILES:
        (git_dir / name).unlink(missing_ok=True)
    for name in _HISTORY_DIRS:
        shutil.rmtree(git_dir / name, ignore_errors=True)
    (git_dir / "refs" / "heads").mkdir(parents=True)
    (git_dir / "refs" / "tags").mkdir()
    if branch:
        run_git(repo, "checkout", "-q", "-B", branch, base_commit)
    objects = git_dir / "objects"
    for name in _OBJECT_INDEXES:  # they list commits by hash, and the repack below rewrites what they index
        path = objects / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for keep in (objects / "pack").glob("*.keep"):
        keep.unlink()
    # One pack of what HEAD and the index reach (alternates included, so they can go), old packs deleted.
    run_git(repo, "repack", "-a", "-d", "-q", "--no-write-bitmap-index")
    (objects / "info" / "alternates").unlink(missing_ok=True)
    run_git(repo, "prune", "--expire=now")
    for stray in (objects / "pack").glob("*.mtimes"):
        stray.unlink()


def tarball_key(dataset: str, instance_id: str) -> str:
    return f"tasks/{dataset}/{instance_id}.tar.gz"


def publish_repo(task: Task, dataset: str, store: ObjectStore) -> Task:
    """Upload the task's repository (with its history) to the store; returns the task with a ``store`` source.

    Workers on other machines then materialize it without access to the original path or URL.
    """
    with tempfile.TemporaryDirectory(prefix="harnessrl-publish-") as tmp:
        repo = materialize(task, Path(tmp) / "repo", store)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for entry in sorted(repo.iterdir()):
                tar.add(entry, arcname=entry.name)
        key = tarball_key(dataset, task.instance_id)
        store.put_bytes(key, buffer.getvalue(), content_type="application/gzip")
    return task.with_source(StoreSource(kind="store", key=key))


def dump_tasks(tasks: Iterable[Task]) -> str:
    """Tasks as JSONL text (the inverse of ``load_tasks`` for absolute sources)."""
    return "".join(json.dumps(t.model_dump(mode="json"), sort_keys=True) + "\n" for t in tasks)
