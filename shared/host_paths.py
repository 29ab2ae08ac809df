"""Host paths that reach a sandbox: a ``shell`` harness's read-only mounts and home template, the folders a task
posted through the REST API may name, and the one way the runner copies a host folder into a sandbox's workspace or
HOME (``copy_readable_tree``).

``check_shell_paths(options, settings)`` raises ``HostPathRefused`` (a one-line message naming the path, and the
option it came from) when a path would weaken the sandbox or cannot work:

- ``/``, the host's home and the data directory are refused, and so is any folder holding one of them (a mount of
  ``/home`` shows every home) or lying inside the data directory (other rollouts' workspaces, the databases, the
  object store, the gateway's socket);
- a path must exist (a mount: a file or a folder; the home template: a folder) and be reachable by the sandbox
  user (every parent searchable);
- nothing under a mount may be writable by the sandbox user (bubblewrap binds it read-only, but a path the sandbox
  user owns is one another sandbox could change under this one); symlinks are not followed;
- everything in the home template must be readable by the sandbox user (it is copied by root: a root-only file
  would otherwise reach the sandbox), hold no special file and no ``.harnessrl`` (the runner's), and at most
  ``TEMPLATE_MAX_FILES`` entries and ``TEMPLATE_MAX_BYTES`` bytes (it is copied for every rollout).

The api calls it when a run is created (a 422 naming the path) and the runner before each attempt (a host that
lacks the path ends the attempt with that reason).

``copy_readable_tree(source, dest, reader_uid=...)`` is how root copies a host folder for a sandbox (a ``dir``
task source in ``shared/tasks.py: materialize``, a home template in ``services/runner/rollout.py``): each entry is
opened with ``O_NOFOLLOW`` from its parent's descriptor, a symlink is recreated as a link (its target is never
read), a special file is refused, and a file or folder the reader uid could not read by its own permission bits is
refused before a byte of it is read — so no root-only file's content reaches a sandbox. The folders above the
source are the operator's choice (a REST client's lie under ``task_dir_allowlist``: ``allowlist_refusal``).
``write_below(root, relative, text)`` writes a file under a folder a template filled without following a link.
"""

from __future__ import annotations

import contextlib
import fnmatch
import grp
import os
import pwd
import stat
from collections.abc import Sequence
from pathlib import Path

from shared.harnesses import HarnessOptions, ShellOptions
from shared.settings import Settings

WALK_MAX_ENTRIES = 200_000
TEMPLATE_MAX_FILES = 2_000
TEMPLATE_MAX_BYTES = 64 * 1024**2
# Names the runner itself writes in a harness's HOME (``services/runner/guard.py``'s audit log): a template must
# not bring its own (a symlink there would point the runner's read elsewhere).
TEMPLATE_RESERVED = (".harnessrl",)
# A reader uid that owns no file and is in no group: only the "other" permission bits grant it anything. Root
# copies for it when it does not know the sandbox uid: stricter than any unprivileged uid that owns nothing.
ANY_UNPRIVILEGED = -1

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a fifo swapped in after the lstat must not block the open.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_COPY_CHUNK_BYTES = 1 << 20


class HostPathRefused(ValueError):
    """A mount or home template the sandbox must not or cannot use; ``field`` is the option's path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def sandbox_uid(settings: Settings) -> int:
    """The uid commands run as in the sandbox (``shared/sandbox.py``: the setting as root, else the caller)."""
    return settings.sandbox_uid if os.geteuid() == 0 else os.geteuid()


def effective_reader_uid(uid: int | None) -> int:
    """The uid a copy for the sandbox is checked against: ``uid`` when given; else the caller when unprivileged (the
    sandbox runs as the caller then), ``ANY_UNPRIVILEGED`` as root."""
    if uid is not None:
        return uid
    return os.geteuid() if os.geteuid() != 0 else ANY_UNPRIVILEGED


def _groups_of(uid: int) -> set[int]:
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return {uid}  # no passwd entry: the sandbox runs it with gid == uid
    return {entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if entry.pw_name in g.gr_mem)}


def _allowed(st: os.stat_result, uid: int, gids: set[int], owner: int, group: int, other: int) -> bool:
    """Whether ``uid`` (in ``gids``) gets the permission whose owner/group/other bits are given."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & owner)
    if st.st_gid in gids:
        return bool(st.st_mode & group)
    return bool(st.st_mode & other)


def _writable_by(st: os.stat_result, uid: int, gids: set[int]) -> bool:
    # A link's own mode means nothing; its target is checked where it lies, if mounted.
    return not stat.S_ISLNK(st.st_mode) and _allowed(st, uid, gids, stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)


def _searchable_by(st: os.stat_result, uid: int, gids: set[int]) -> bool:
    return _allowed(st, uid, gids, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)


def readable_by(st: os.stat_result, uid: int) -> bool:
    """Whether the sandbox's ``uid`` could read this entry (a folder: list and enter it). The sandbox drops every
    supplementary group (``setpriv --clear-groups``, gid = uid), so only ``uid`` itself is its group."""
    gids = {uid}
    if not _allowed(st, uid, gids, stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH):
        return False
    return not stat.S_ISDIR(st.st_mode) or _searchable_by(st, uid, gids)


def _who(uid: int) -> str:
    return "an unprivileged sandbox user" if uid == ANY_UNPRIVILEGED else f"sandbox uid {uid}"


def _protected(settings: Settings) -> dict[Path, str]:
    """Paths no sandbox may see, each with the words that name it in an error."""
    protected = {Path("/"): "the root directory", settings.data_dir.resolve(): "the data directory"}
    for home in {Path.home(), Path(os.environ.get("HOME") or Path.home())}:
        protected.setdefault(home.resolve(), "the host's home")
    return protected


def _refusal(path: Path, settings: Settings) -> str | None:
    for protected, what in _protected(settings).items():
        if path == protected:
            return f"it is {what}"
        if path in protected.parents:
            return f"it holds {what} ({protected})"
        if what == "the data directory" and protected in path.parents:
            return f"it lies inside {what} ({protected})"
    return None


def _check_one(field: str, raw: str, settings: Settings, uid: int, gids: set[int], *, template: bool) -> None:
    kind = "home template" if template else "mount"
    path = Path(os.path.normpath(raw))
    try:
        resolved = path.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise HostPathRefused(field, f"{kind} {raw} does not exist on this host") from None
    if why := _refusal(resolved, settings):
        raise HostPathRefused(field, f"{kind} {raw} is refused: {why}")
    if template and not resolved.is_dir():
        raise HostPathRefused(field, f"{kind} {raw} is not a directory")
    for parent in reversed(resolved.parents):
        if not _searchable_by(parent.stat(), uid, gids):
            raise HostPathRefused(
                field, f"{kind} {raw} is not reachable by sandbox uid {uid}: {parent} is not searchable"
            )
    if template:
        _check_template(field, raw, resolved, uid)
    else:
        _check_read_only(field, raw, resolved, uid, gids)


def _check_read_only(field: str, raw: str, root: Path, uid: int, gids: set[int]) -> None:
    for seen, entry in enumerate(_walk(root), start=1):
        if seen > WALK_MAX_ENTRIES:
            raise HostPathRefused(
                field, f"mount {raw} holds more than {WALK_MAX_ENTRIES} entries; mount a narrower path"
            )
        if _writable_by(entry.lstat(), uid, gids):
            raise HostPathRefused(
                field,
                f"mount {raw} is writable by sandbox uid {uid} ({entry}); make it read-only for that user",
            )


def _check_template(field: str, raw: str, root: Path, uid: int) -> None:
    total = 0
    for files, entry in enumerate(_walk(root), start=1):
        st = entry.lstat()
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
        if files > TEMPLATE_MAX_FILES or total > TEMPLATE_MAX_BYTES:
            raise HostPathRefused(
                field,
                f"home template {raw} is larger than {TEMPLATE_MAX_FILES} entries or {TEMPLATE_MAX_BYTES >> 20} MiB "
                "(it is copied for every rollout)",
            )
        if entry.parent == root and entry.name in TEMPLATE_RESERVED:
            raise HostPathRefused(
                field, f"home template {raw} holds {entry.name}, which the runner writes itself"
            )
        if stat.S_ISLNK(st.st_mode):
            continue  # copied as a link, never followed
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise HostPathRefused(
                field, f"home template {raw} holds {entry}, which is not a file, folder or link"
            )
        if not readable_by(st, uid):
            raise HostPathRefused(
                field,
                f"home template {raw} holds {entry} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}), "
                f"which {_who(uid)} cannot read; the runner copies only what the sandbox user could read",
            )


def _walk(root: Path):  # type: ignore[no-untyped-def]
    """``root`` and everything under it, depth first, symlinks not followed."""
    yield root
    if root.is_symlink() or not root.is_dir():
        return
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            yield Path(directory) / name


def check_shell_paths(options: HarnessOptions, settings: Settings) -> None:
    """Raise ``HostPathRefused`` for the first mount or home template of a ``shell`` harness that the sandbox
    must not or cannot use (see the module docstring); other harnesses have none."""
    if not isinstance(options, ShellOptions):
        return
    uid = sandbox_uid(settings)
    gids = _groups_of(uid)
    for index, mount in enumerate(options.mounts):
        _check_one(f"harness.mounts[{index}]", mount, settings, uid, gids, template=False)
    if options.home_template is not None:
        _check_one("harness.home_template", options.home_template, settings, uid, gids, template=True)


# --- the REST API's allow-list ---------------------------------------------------------------------------


def allowlist_roots(settings: Settings) -> list[Path]:
    """The folders of ``task_dir_allowlist`` (':'-separated; relative entries are ignored), resolved."""
    return [Path(p).resolve() for p in settings.task_dir_allowlist.split(":") if p.strip().startswith("/")]


def allowlist_refusal(path: str, settings: Settings) -> str | None:
    """Why a REST client may not name host path ``path`` (a task source, a task file), or None when it lies under
    an allow-listed folder. The path is resolved first (symlinks and '..' cannot leave the folder)."""
    roots = allowlist_roots(settings)
    if not roots:
        return (
            f"host path {path} is refused: tasks posted through the API may not name host folders unless the operator "
            "allows them (HARNESSRL_TASK_DIR_ALLOWLIST, empty here); use a bundled dataset, a git URL or an "
            "object-store source"
        )
    resolved = Path(os.path.normpath(path)).resolve()
    if any(resolved == root or root in resolved.parents for root in roots):
        return None
    allowed = ", ".join(str(r) for r in roots)
    return f"host path {path} is refused: it is not under an allowed folder (HARNESSRL_TASK_DIR_ALLOWLIST: {allowed})"


# --- copies for the sandbox ------------------------------------------------------------------------------


class _Budget:
    def __init__(self, max_entries: int | None, max_bytes: int | None) -> None:
        self.entries, self.size_bytes = 0, 0
        self.max_entries, self.max_bytes = max_entries, max_bytes

    def spend(self, size_bytes: int) -> bool:
        self.entries += 1
        self.size_bytes += size_bytes
        over_entries = self.max_entries is not None and self.entries > self.max_entries
        return not (over_entries or (self.max_bytes is not None and self.size_bytes > self.max_bytes))


def copy_readable_tree(
    source: Path,
    dest: Path | None,
    *,
    reader_uid: int | None = None,
    field: str,
    what: str,
    skip: Sequence[str] = (),
    reserved: Sequence[str] = (),
    max_entries: int | None = None,
    max_bytes: int | None = None,
) -> None:
    """Copy folder ``source`` into ``dest`` (created if absent; None: only check) as root may copy it for a sandbox
    whose user is ``reader_uid`` (see ``effective_reader_uid``): nothing is followed, and anything that user could not read
    is refused (``HostPathRefused(field, ...)`` naming it) before its content is read. ``skip``: name patterns left
    out at every level (caches); ``reserved``: names refused at the top level; ``max_entries``/``max_bytes``: caps.
    A refusal may leave a partial ``dest``: the caller removes it."""
    uid = effective_reader_uid(reader_uid)
    root = os.path.realpath(source)  # the folder named may be reached through links; nothing below it is
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise HostPathRefused(
            field, f"{what} {source} cannot be opened as a folder: {exc.strerror}"
        ) from None
    try:
        st = os.fstat(fd)
        if not readable_by(st, uid):
            raise HostPathRefused(field, _unreadable(what, source, Path(root), st, uid))
        for name in reserved:
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            raise HostPathRefused(field, f"{what} {source} holds {name}, which the runner writes itself")
        if dest is not None:
            dest.mkdir(parents=True, exist_ok=True)
        _copy_dir(
            fd, Path(root), dest, uid, field, what, source, tuple(skip), _Budget(max_entries, max_bytes)
        )
    finally:
        os.close(fd)


def _unreadable(what: str, source: Path, entry: Path, st: os.stat_result, uid: int) -> str:
    return (
        f"{what} {source} holds {entry} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}), which "
        f"{_who(uid)} cannot read; only what the sandbox user could read is copied into a sandbox"
    )


def _copy_dir(
    fd: int, shown: Path, dest: Path | None, uid: int, field: str, what: str, source: Path, skip: tuple[str, ...],
    budget: _Budget,
) -> None:  # fmt: skip
    for name in sorted(os.listdir(fd)):
        if any(fnmatch.fnmatch(name, pattern) for pattern in skip):
            continue
        entry = shown / name
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not budget.spend(st.st_size if stat.S_ISREG(st.st_mode) else 0):
            raise HostPathRefused(
                field,
                f"{what} {source} is larger than {budget.max_entries} entries or {budget.max_bytes} bytes",
            )
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(name, dir_fd=fd)  # the link's own text; its target is never opened
            if dest is not None:
                os.symlink(target, dest / name)
        elif stat.S_ISDIR(st.st_mode):
            child = _open_same(name, fd, _DIR_FLAGS, st, field, what, source, entry)
            try:
                if not readable_by(os.fstat(child), uid):
                    raise HostPathRefused(field, _unreadable(what, source, entry, st, uid))
                if dest is not None:
                    (dest / name).mkdir()
                _copy_dir(child, entry, dest / name if dest is not None else None, uid, field, what, source, skip,
                          budget)  # fmt: skip
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode):
            src = _open_same(name, fd, _FILE_FLAGS, st, field, what, source, entry)
            try:
                fst = os.fstat(src)
                if not stat.S_ISREG(fst.st_mode):
                    raise HostPathRefused(
                        field, f"{what} {source} holds {entry}, which changed while being copied"
                    )
                if not readable_by(fst, uid):
                    raise HostPathRefused(field, _unreadable(what, source, entry, fst, uid))
                if dest is not None:
                    _copy_file(src, dest / name, stat.S_IMODE(fst.st_mode) & 0o777)
            finally:
                os.close(src)
        else:
            raise HostPathRefused(
                field, f"{what} {source} holds {entry}, a special file (fifo, socket or device): refused"
            )


def _open_same(
    name: str, dir_fd: int, flags: int, st: os.stat_result, field: str, what: str, source: Path, entry: Path
) -> int:
    """Open ``name`` without following a link, and make sure it is still the entry that was looked at."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise HostPathRefused(field, f"{what} {source}: cannot open {entry} safely: {exc.strerror}") from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise HostPathRefused(field, f"{what} {source} holds {entry}, which changed while being copied")
    return fd


def _copy_file(src: int, dest: Path, mode: int) -> None:
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        while chunk := os.read(src, _COPY_CHUNK_BYTES):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view) :]
        os.fchmod(out, mode)
    finally:
        os.close(out)


def write_below(root: Path, relative: str, text: str) -> None:
    """Write ``root/relative`` (folders created as needed) without following a symlink below ``root``: a folder a
    home template filled may hold links, and root must never write through one. ``HostPathRefused`` names a link
    or a non-folder on the way."""
    parts = [p for p in Path(relative).parts if p not in ("", ".")]
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise HostPathRefused("harness.files", f"{relative!r} is not a plain relative path")
    fds = [os.open(root, _DIR_FLAGS)]
    try:
        for name in parts[:-1]:
            with contextlib.suppress(FileExistsError):  # an existing one is checked by the open below
                os.mkdir(name, 0o755, dir_fd=fds[-1])
            try:
                fds.append(os.open(name, _DIR_FLAGS, dir_fd=fds[-1]))
            except OSError:
                raise HostPathRefused(
                    "harness.files",
                    f"{root}/{relative}: {name!r} is a link or not a folder; not written through",
                ) from None
        try:
            out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o644, dir_fd=fds[-1])  # fmt: skip
        except OSError:
            raise HostPathRefused(
                "harness.files", f"{root}/{relative} is a link or not a regular file; not written through"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise HostPathRefused("harness.files", f"{root}/{relative} is not a regular file")
            view = memoryview(text.encode())
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
    finally:
        for fd in fds:
            os.close(fd)
