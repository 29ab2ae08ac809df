"""``harnessrl up``'s stop signals: a ``Shutdown`` that Python swallows (raised inside a weakref callback, where the
handler happened to run) is raised again by ``raise_if_stopping`` — CI once saw ``up`` outlive a SIGTERM by minutes
with every service still running, the handler's exception lost in ``WeakValueDictionary.remove``."""

from __future__ import annotations

import gc
import os
import signal
import weakref

import pytest

from services.cli.up import Shutdown, raise_if_stopping, stop_on_signals


class _Thing:
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_shutdown_lost_inside_a_weakref_callback_is_raised_at_the_next_check() -> None:
    with stop_on_signals():
        raise_if_stopping()  # no signal yet: nothing
        thing = _Thing()
        steps = []

        def callback(_ref: object) -> None:
            steps.append("signalled")
            os.kill(
                os.getpid(), signal.SIGTERM
            )  # the handler runs right after, in this callback: its raise is lost
            steps.append("not reached")

        ref = weakref.ref(thing, callback)
        del thing
        gc.collect()
        assert ref() is None
        assert steps == ["signalled"], "the handler did not run (and raise) inside the callback"
        with pytest.raises(Shutdown) as raised:
            raise_if_stopping()
        assert raised.value.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # a second signal cannot cut the stop short
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # handlers restored on the way out


def test_a_new_suite_does_not_inherit_an_earlier_stop() -> None:
    with pytest.raises(Shutdown), stop_on_signals():
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(1000):  # the handler raises at the next bytecode boundary
            pass
    with stop_on_signals():
        raise_if_stopping()  # the earlier run's signal is forgotten


_BACKGROUND_JOB = """
import sys, time
from services.cli.up import Shutdown, stop_on_signals
try:
    with stop_on_signals():
        print("ready", flush=True)
        time.sleep(60)
except Shutdown as exc:
    print(f"stopped on {exc.args[0]}", flush=True)
    sys.exit(0)
sys.exit(1)
"""


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_background_job_with_sigint_ignored_still_stops_on_each_signal(stop_signal: signal.Signals) -> None:
    """A shell starts a background ``harnessrl up`` with SIGINT ignored, and Python then installs no SIGINT
    handler: ``stop_on_signals`` handles it anyway, in a real process. (What ``up`` does on ``Shutdown`` is the
    same for every signal; tests/e2e/test_suite.py stops a whole background ``up`` with SIGTERM.)"""
    import subprocess
    import sys
    from pathlib import Path

    job = subprocess.Popen(
        [sys.executable, "-c", _BACKGROUND_JOB],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - as a shell does
    )
    assert job.stdout is not None and job.stdout.readline().strip() == "ready"
    job.send_signal(stop_signal)
    out, _ = job.communicate(timeout=30)
    assert job.returncode == 0 and out.strip() == f"stopped on {stop_signal.name}", (job.returncode, out)
