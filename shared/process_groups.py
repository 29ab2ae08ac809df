"""Stopping a process group and knowing it is gone.

``kill`` returns once a signal is queued; a SIGKILLed process keeps its place in the process table until the
kernel has torn it down (freeing a vLLM worker's memory takes a moment), and a leader's exit says nothing about
the rest of its group. A service that stops a group waits here until none of it is left, so whoever stopped the
suite finds nothing of it running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not exited (zombies, gone but not yet reaped, do not count)."""
    members = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            state, _ppid, pgrp = (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # exited while we looked
        if int(pgrp) == pgid and state not in ("Z", "X"):
            members.append(int(proc_dir.name))
    return sorted(members)


def _wait_gone(pgid: int, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def stop_group(pgid: int, grace_s: float = 5.0, timeout_s: float = 10.0) -> list[int]:
    """Once a group's leader has exited: give the rest of group ``pgid`` ``grace_s`` to exit on its own (a
    resource tracker cleans up what it tracks when it notices), SIGKILL what is left, and wait until none of
    it is left; return the processes still there ``timeout_s`` after the SIGKILL (none, unless one is stuck
    in the kernel)."""
    if not _wait_gone(pgid, grace_s):
        return []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    return _wait_gone(pgid, timeout_s)
