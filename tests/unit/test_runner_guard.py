"""Which git commands count as looking past the checked-out history (``services/runner/guard.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.runner import guard
from shared.tasks import Task

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "line",
    ["log --all --oneline", "-C /workspace log --branches", "reflog", "fsck --lost-found",
     "cat-file --batch-all-objects --batch-check", "rev-list --all", "for-each-ref", "fetch origin",
     "show --reflog", "stash list", "-c core.pager=cat log -g", "log --tags=v*"],
)  # fmt: skip
def test_history_commands_are_flagged(line: str) -> None:
    assert guard.is_history_command(line)


@pytest.mark.parametrize(
    "line",
    ["status", "diff", "log --oneline -5", "show HEAD", "add -A", "commit -m 'log --all'", "-C x status"],
)
def test_ordinary_commands_are_not(line: str) -> None:
    assert not guard.is_history_command(line)


def test_the_wrapper_log_is_read_and_filtered(tmp_path: Path) -> None:
    bin_dir = guard.install(tmp_path / "guard")
    assert (bin_dir / "git").read_text().startswith("#!/bin/sh") and (bin_dir / "git").stat().st_mode & 0o111
    log = tmp_path / "home" / guard.AUDIT_FILE
    log.parent.mkdir(parents=True)
    log.write_text("status\nlog --all\ndiff\nreflog\n")
    assert guard.history_commands(tmp_path / "home") == ["git log --all", "git reflog"]
    assert guard.history_commands(tmp_path / "nowhere") == []


def test_protected_paths_touched_by_a_patch() -> None:
    task = Task.model_validate(
        {"instance_id": "t", "repo": "r", "base_commit": "0" * 40, "problem_statement": "p",
         "source": {"kind": "dir", "path": "/x"}, "protected_paths": ["tests"], "FAIL_TO_PASS": ["t::t"],
         "test_patch": "--- a/conftest.py\n+++ b/conftest.py\n@@ -1 +1 @@\n-a\n+b\n"}
    )  # fmt: skip
    patch = (
        "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\n"
        "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
        "--- a/conftest.py\n+++ b/conftest.py\n@@ -1 +1 @@\n-a\n+b\n"
        "--- a/testsuite.py\n+++ b/testsuite.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert guard.protected_paths_touched(task, patch.encode()) == ["tests/test_x.py", "conftest.py"]
