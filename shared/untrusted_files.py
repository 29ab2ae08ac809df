"""Host-side reads of files an untrusted process could have written (a sandbox's workspace or HOME): the one way the
runner opens them (``services/runner/guard.py`` reads the git wrapper's log from the harness's HOME).

Whatever sat at such a path when the sandbox ended is the agent's choice: a symlink to ``/dev/zero`` or to a
root-only host file, a symlinked parent directory, a fifo that blocks ``open``, a file of gigabytes.
``read_untrusted`` walks from a trusted ``root`` one component at a time with ``O_NOFOLLOW`` (a symlink anywhere on
the way is refused, never followed), opens the file without blocking, refuses anything that is not a regular
file, and reads at most ``max_bytes``. The root itself is the caller's: a directory the runner created, whose
entry the sandbox cannot replace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class UntrustedFileError(OSError):
    """The path cannot be read safely (a symlink, not a regular file, missing); the message says which part."""


@dataclass(frozen=True)
class UntrustedRead:
    """What ``read_untrusted`` read: at most ``max_bytes`` of the file; ``truncated`` when the file had more."""

    data: bytes
    size_bytes: int
    truncated: bool


def _components(relative: str | PurePosixPath) -> list[str]:
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise UntrustedFileError(errno.EINVAL, f"{str(relative)!r} is not a plain relative path")
    return list(parts)


def read_untrusted(root: Path, relative: str | PurePosixPath, max_bytes: int) -> UntrustedRead:
    """Read ``root/relative`` without following any symlink below ``root``: at most ``max_bytes`` bytes of a regular
    file. ``UntrustedFileError`` for a symlink, a special file, a directory or a missing entry on the way."""
    parts = _components(relative)
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(root, flags_dir))
        except OSError as exc:
            raise UntrustedFileError(exc.errno, f"{root}: not a plain directory: {exc.strerror}") from None
        for name in parts[:-1]:
            try:
                fds.append(os.open(name, flags_dir, dir_fd=fds[-1]))
            except OSError as exc:  # ELOOP/ENOTDIR: a symlink or a file where a directory should be
                raise UntrustedFileError(
                    exc.errno, f"{root}/{relative}: {name!r} is not a plain directory"
                ) from None
        try:
            # O_NONBLOCK: a fifo must not block the open; O_NOFOLLOW: a symlink fails with ELOOP.
            fd = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fds[-1]
            )
        except OSError as exc:
            raise UntrustedFileError(
                exc.errno, f"{root}/{relative}: cannot open without following links: {exc.strerror}"
            ) from None
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFileError(errno.EINVAL, f"{root}/{relative} is not a regular file")
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        more = left <= 0 and bool(os.read(fd, 1))
        return UntrustedRead(data=data, size_bytes=st.st_size, truncated=more or st.st_size > len(data))
    finally:
        for fd in reversed(fds):
            with contextlib.suppress(OSError):
                os.close(fd)
