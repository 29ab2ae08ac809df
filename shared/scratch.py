"""Per-task scratch directories, named after the process that owns them, and the sweep that removes the ones
whose owner died.

Graders, sandboxes and the runner's patch step work in ``TemporaryDirectory`` folders that are removed when the
work ends — unless the process is SIGKILLed (an OOM kill, a hard time limit, a node drain). Their names carry
the owner's pid (``harnessrl-grade-<pid>-…``), so a worker starting on the same host (``worker_ready``) removes
exactly the folders whose owner no longer runs: never one that a live process, in this worker or another one,
is still using. Folders named without a pid (older versions) are left alone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

KINDS = ("grade", "sandbox", "patch")
_NAME = re.compile(r"^harnessrl-(?:" + "|".join(KINDS) + r")-(\d+)-")


def scratch_prefix(kind: str) -> str:
    """``TemporaryDirectory(prefix=...)`` for a scratch folder of ``kind`` owned by this process."""
    if kind not in KINDS:
        raise ValueError(f"unknown scratch kind {kind!r}; one of {', '.join(KINDS)}")
    return f"harnessrl-{kind}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def sweep_dead_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders under ``root`` (the temp dir by default) whose owning process is gone."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return []
    for path in entries:
        match = _NAME.match(path.name)
        if match is None or path.is_symlink() or not path.is_dir() or _alive(int(match.group(1))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    if removed:
        log.info("removed %d scratch folder(s) of dead processes under %s", len(removed), root)
    return removed


def _on_worker_ready(**_: object) -> None:
    sweep_dead_scratch()


def sweep_when_worker_starts() -> None:
    """Sweep dead owners' scratch folders once this process's Celery worker is ready (idempotent)."""
    from celery.signals import worker_ready

    worker_ready.connect(_on_worker_ready, weak=False, dispatch_uid="harnessrl-sweep-scratch")
