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
