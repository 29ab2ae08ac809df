"""Stopping a process group: nothing of it is left when ``stop_group`` returns."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from shared.process_groups import group_members, stop_group

# A leader that starts a child in its own group which ignores SIGTERM and outlives it, prints the child's pid.
LEADER_WITH_A_LINGERING_CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(child.pid, flush=True)
"""


def test_a_group_s_members_are_its_live_processes_only() -> None:
    leader = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        assert group_members(leader.pid) == [leader.pid]
        leader.kill()
        deadline = time.monotonic() + 10
        while group_members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        state = Path(f"/proc/{leader.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "Z"  # not reaped yet (no wait() so far): in the table, but not a member
        assert group_members(leader.pid) == []
    finally:
        leader.kill()
        leader.wait()


def test_stop_group_kills_what_outlives_the_leader_and_returns_once_it_is_gone() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER_WITH_A_LINGERING_CHILD], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    assert leader.wait(30) == 0
    assert group_members(leader.pid) == [child]

    started = time.monotonic()
    assert stop_group(leader.pid, grace_s=0.2, timeout_s=10) == []
    assert group_members(leader.pid) == []
    assert time.monotonic() - started < 10


def test_stop_group_leaves_a_group_that_exits_on_its_own_within_the_grace() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess; subprocess.Popen(['sleep', '0.3'])"],
        start_new_session=True,
    )
    assert leader.wait(30) == 0
    started = time.monotonic()
    assert stop_group(leader.pid, grace_s=20, timeout_s=1) == []
    assert time.monotonic() - started < 10  # returned when the sleep ended, not at the end of the grace
