"""Host-side reads of what the agent controls (issue 36, item 3): the runner reads the git wrapper's log from the
harness's HOME, which the agent may replace by a link to ``/dev/zero``, to a root-only host file, or put behind a
linked directory. The runner opens it without following any link, as a regular file only, and reads a bounded
prefix (``shared/untrusted_files.py``): the rollout finishes, nothing of the host file reaches it, and the
runner's memory stays where it was.

Each test runs one attack as the shell harness through the real runner, sandbox and grader (``attack``); the
secret is a root-only file in the test's tmp dir, a host folder the sandbox cannot see.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from shared.db import session_scope
from shared.models import Rollout

pytestmark = [pytest.mark.e2e]

LOG = "$HOME/.harnessrl/git-commands.log"
# What the secret says: a line the history filter keeps, so a followed link would put it on the rollout.
SECRET = "log --all HOST-AUDIT-SECRET"


@pytest.mark.parametrize("target", ["dev-zero", "secret-file", "secret-dir"])
def test_audit_log_links_are_not_followed(attack, toy_task, db, tmp_path: Path, target: str) -> None:  # type: ignore[no-untyped-def]
    secret_dir = tmp_path / "audit"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "git-commands.log").write_text(f"{SECRET}\n")
    (secret_dir / "git-commands.log").chmod(0o600)
    script = {
        "dev-zero": f"git log --all > /dev/null; rm -f {LOG} && ln -s /dev/zero {LOG}",
        "secret-file": f"rm -f {LOG} && ln -s {secret_dir}/git-commands.log {LOG}",
        "secret-dir": f"rm -rf $HOME/.harnessrl && ln -s {secret_dir} $HOME/.harnessrl",
    }[target]
    peak_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    result = attack(toy_task, script)

    peak_after_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert peak_after_kib - peak_before_kib < 256 * 1024, "the runner read the link's target into memory"
    assert result.outcome != "infrastructure_error", result
    assert result.status == "graded" and result.reward == 0.0, result
    with session_scope(db) as session:
        row = session.get(Rollout, result.rollout_id)
        assert row is not None
        recorded = json.dumps([row.git_history_commands, row.meta, row.error, row.outcome_reason])
    assert "HOST-AUDIT-SECRET" not in recorded
    assert row.git_history_commands == []  # a log that is not a plain file reads as empty
