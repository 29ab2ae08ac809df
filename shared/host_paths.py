"""Host paths a ``shell`` harness brings into the sandbox: its read-only mounts and its home template.

``check_shell_paths(options, settings)`` raises ``HostPathRefused`` (a one-line message naming the path, and the
option it came from) when a path would weaken the sandbox or cannot work:

- ``/``, the host's home and the data directory are refused, and so is any folder holding one of them (a mount of
  ``/home`` shows every home) or lying inside the data directory (other rollouts' workspaces, the databases, the
  object store, the gateway's socket);
- a path must exist (a mount: a file or a folder; the home template: a folder) and be reachable by the sandbox
  user (every parent searchable);
- nothing under a mount may be writable by the sandbox user (bubblewrap binds it read-only, but a path the sandbox
  user owns is one another sandbox could change under this one); symlinks are not followed;
- the home template holds at most ``TEMPLATE_MAX_FILES`` entries and ``TEMPLATE_MAX_BYTES`` bytes (it is copied
  for every rollout).

The api calls it when a run is created (a 422 naming the path) and the runner before each attempt (a host that
lacks the path ends the attempt with that reason).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from shared.harnesses import HarnessOptions, ShellOptions
from shared.settings import Settings

WALK_MAX_ENTRIES = 200_000
TEMPLATE_MAX_FILES = 2_000
TEMPLATE_MAX_BYTES = 64 * 1024**2


class HostPathRefused(ValueError):
    """A mount or home template the sandbox must not or cannot use; ``field`` is the option's path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def sandbox_uid(settings: Settings) -> int:
    """The uid commands run as in the sandbox (``shared/sandbox.py``: the setting as root, else the caller)."""
    return settings.sandbox_uid if os.geteuid() == 0 else os.geteuid()


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
        _check_template_size(field, raw, resolved)
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


def _check_template_size(field: str, raw: str, root: Path) -> None:
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
