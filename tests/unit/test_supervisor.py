"""The ``harnessrl up`` supervisor with small real child processes: readiness, a death reported by name and
signal and restarted, a finished service let go, a child that never gets ready named with its log tail, a port
still held by an orphan of a dead service reported (not a fake "ready"), and logs merged with a prefix."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from services.cli.supervisor import ServiceFailed, ServiceSpec, Supervisor, http_ready, log_ready
from tests.fixtures.services import free_port

pytestmark = pytest.mark.unit


def python(code: str) -> list[str]:
    return [sys.executable, "-u", "-c", code]


SERVES = python("import time; print('hello', flush=True); print('ready.', flush=True); time.sleep(120)")


@pytest.fixture
def supervisor(tmp_path: Path):  # type: ignore[no-untyped-def]
    sup = Supervisor(tmp_path / "logs" / "up.log", dict(os.environ), echo=True, out=io.StringIO())
    yield sup
    sup.stop_all()


def test_a_killed_service_is_reported_and_restarted(supervisor: Supervisor) -> None:
    supervisor.start(ServiceSpec("worker", SERVES, log_ready("ready."), ready_timeout_s=30))
    first = supervisor.running["worker"].proc
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(10)

    assert supervisor.poll() == ["worker"]

    assert "SERVICE DOWN: worker exited with signal 9 (SIGKILL); restarting (restart #1)" in supervisor.events
    assert "worker restarted; work in flight resumes from Postgres and the queues" in supervisor.events
    fresh = supervisor.running["worker"]
    assert fresh.proc.pid != first.pid and fresh.proc.poll() is None
    assert fresh.restarts == 1
    assert supervisor.poll() == []  # a healthy service is left alone


def test_a_finished_service_is_let_go_not_restarted(supervisor: Supervisor) -> None:
    finishes = python("import time; print('ready.', flush=True); time.sleep(0.5)")
    supervisor.start(ServiceSpec("learner-x", finishes, log_ready("ready."), done_on_success=True))
    supervisor.running["learner-x"].proc.wait(10)

    assert supervisor.poll() == []
    assert "learner-x" not in supervisor.running
    assert supervisor.events[-1] == "learner-x exited with code 0"


def test_a_service_that_crashes_while_starting_is_named_with_its_log(supervisor: Supervisor) -> None:
    crashes = python("import sys; print('cannot bind port 8300'); sys.exit(3)")
    with pytest.raises(
        ServiceFailed, match=r"(?s)api exited with code 3 while starting:.*cannot bind port 8300"
    ):
        supervisor.start(ServiceSpec("api", crashes, log_ready("never")))


def test_a_job_that_finishes_before_its_readiness_is_checked_is_started_and_let_go(
    supervisor: Supervisor,
) -> None:
    # It says it is ready and exits at once: on a loaded machine the exit is seen before the marker is read.
    instant = python("print('ready.', flush=True)")
    supervisor.start(ServiceSpec("learner-y", instant, log_ready("ready."), done_on_success=True))
    supervisor.running["learner-y"].proc.wait(10)

    assert supervisor.poll() == []
    assert supervisor.events[-1] == "learner-y exited with code 0"


def test_a_crash_is_reported_with_its_last_lines_though_they_were_still_in_the_pipe(
    supervisor: Supervisor,
) -> None:
    # On a loaded machine the reader thread runs behind the exit, so the cause is still in the pipe when the exit is
    # seen. Made certain here: a forked child of the service writes the cause 0.5 s after the service exited; the
    # report waits for the pipe to close.
    late = python(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    time.sleep(0.5); print('cannot bind port 8301', flush=True); os._exit(0)\n"
        "print('starting', flush=True); sys.exit(3)\n"
    )
    with pytest.raises(
        ServiceFailed, match=r"(?s)api exited with code 3 while starting:\nstarting\ncannot bind port 8301$"
    ):
        supervisor.start(ServiceSpec("api", late, log_ready("never")))


def test_a_job_that_finishes_without_saying_it_is_ready_failed_to_start(supervisor: Supervisor) -> None:
    silent = python("print('nothing to do')")
    with pytest.raises(
        ServiceFailed, match=r"(?s)learner-z exited with code 0 while starting:.*nothing to do"
    ):
        supervisor.start(ServiceSpec("learner-z", silent, log_ready("ready."), done_on_success=True))


def test_logs_are_merged_with_a_prefix_and_stop_all_stops_everything(tmp_path: Path) -> None:
    out = io.StringIO()
    supervisor = Supervisor(tmp_path / "up.log", dict(os.environ), echo=True, out=out)
    supervisor.start(ServiceSpec("gateway", SERVES, log_ready("ready.")))
    proc = supervisor.running["gateway"].proc
    supervisor.stop_all()

    assert proc.poll() == -signal.SIGTERM
    log = (tmp_path / "up.log").read_text()
    assert "  gateway | hello\n" in log
    assert "       up | stopping gateway\n" in log
    assert "  gateway | hello\n" in out.getvalue()


def test_a_port_held_by_an_orphan_is_reported_and_the_restart_waits_for_it(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    # The service starts an HTTP server in a session of its own (as `serve inference` starts vLLM) and writes
    # its pid; SIGKILLing the service's group leaves that server running on the service's port.
    port = free_port()
    pid_file = tmp_path / "server.pid"
    service = python(
        "import subprocess, sys, time\n"
        f"server = subprocess.Popen([sys.executable, '-m', 'http.server', '{port}', '--bind', '127.0.0.1'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(server.pid))\n"
        "time.sleep(120)\n"
    )
    supervisor.held_port_wait_s = 1.0
    spec = ServiceSpec("inference", service, http_ready(f"http://127.0.0.1:{port}/"), ready_timeout_s=30)
    servers: list[int] = []
    try:
        supervisor.start(spec)
        servers.append(int(pid_file.read_text()))
        dead = supervisor.running["inference"].proc
        os.killpg(dead.pid, signal.SIGKILL)
        dead.wait(10)

        assert supervisor.poll() == []
        assert supervisor.poll() == []  # still held: no second report, no restart
        held = [e for e in supervisor.events if "cannot restart" in e]
        assert held == [
            "inference cannot restart: its readiness check still answers after it died (an orphaned child "
            "process holding its port?); it restarts once that is gone"
        ]
        assert supervisor.running["inference"].proc is dead

        os.kill(servers[0], signal.SIGKILL)  # the orphan goes away: the next poll restarts the service
        time.sleep(0.5)
        assert supervisor.poll() == ["inference"]
        servers.append(int(pid_file.read_text()))
        assert servers[1] != servers[0]
        assert "inference restarted; work in flight resumes from Postgres and the queues" in supervisor.events
    finally:
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_stop_leaves_nothing_of_the_service_behind(supervisor: Supervisor, tmp_path: Path) -> None:
    """A helper the service left in its process group that outlasts it (as multiprocessing's resource tracker
    does) is killed with it: nothing of a stopped service stays in the process table."""
    pid_file = tmp_path / "helper.pid"
    helper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    code = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {helper!r}]); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid)); print('ready.', flush=True); time.sleep(120)"
    )
    supervisor.start(ServiceSpec("inference", python(code), log_ready("ready."), ready_timeout_s=30))
    helper_pid = int(pid_file.read_text())
    supervisor.stop("inference", timeout_s=5)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{helper_pid}").exists() and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(helper_pid, os.WNOHANG)  # reaped by init in real life; here it may be ours to reap
        time.sleep(0.05)
    state = (
        Path(f"/proc/{helper_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if Path(f"/proc/{helper_pid}").exists()
        else "gone"
    )
    assert state in ("gone", "Z"), f"the service's helper {helper_pid} outlived it (state {state})"
