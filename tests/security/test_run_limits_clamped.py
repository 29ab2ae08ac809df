"""A run's limits only lower the operator's (issue 36, item 4): a client that asks for more memory or processes than
``settings.sandbox_memory_bytes`` / ``sandbox_max_processes`` gets the operator's. The attack writes the limits it
finds inside the sandbox (``/proc/self/limits``: what ``ulimit -v`` and ``ulimit -u`` show; dash has no ``ulimit
-u``) into the workspace, so the stored patch shows them."""

from __future__ import annotations

import re

import pytest

from shared.sandbox import NPROC_BACKSTOP_FACTOR

pytestmark = [pytest.mark.e2e]


def test_run_limits_above_the_operators_are_clamped(attack, toy_task, sandbox) -> None:  # type: ignore[no-untyped-def]
    asked = {"memory_bytes": 1 << 40, "processes": 100_000}

    result = attack(toy_task, "cat /proc/self/limits > limits.txt", limits=asked)

    patch = result.patch or b""
    address_space = re.search(rb"\+Max address space +(\d+)", patch)
    processes = re.search(rb"\+Max processes +(\d+)", patch)
    assert address_space and processes, patch.decode(errors="replace")
    settings = sandbox.settings
    assert int(address_space[1]) == settings.sandbox_memory_bytes, "the run raised the address-space limit"
    # RLIMIT_NPROC is the process cap, times a backstop factor where a pids cgroup holds the real cap.
    cap = settings.sandbox_max_processes * NPROC_BACKSTOP_FACTOR
    assert int(processes[1]) <= cap, "the run raised the process limit"
    assert result.status == "graded" and result.reward == 0.0, result
