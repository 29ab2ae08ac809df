"""A small process supervisor: start services in order, wait for readiness, merge their logs with a prefix,
report and restart a service that dies, stop everything cleanly on Ctrl-C.

Concurrency model: the main thread owns the ``Supervisor`` and calls ``poll()`` periodically; one reader thread
per child copies its output, line by line, to the console and the combined log file. Restarts happen only from
``poll()``, so there is never more than one instance of a service.

Each service runs in a process group of its own (``start_new_session``). When its main process dies, whatever it
started is still running in that group (a vLLM engine core, a Celery pool child, a shell's background job): it
holds the service's port, GPU memory or queue messages, and a restarted instance would run beside it. ``poll()``
therefore ends the dead service's whole group (``shared.process_groups.stop_group``) before it restarts it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from shared.process_groups import stop_group

COLORS = ["36", "32", "33", "35", "34", "31", "96", "92", "93"]


class ServiceFailed(RuntimeError):
    """A service did not become ready; the message names it and shows the end of its log."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def http_ready(url: str) -> Callable[[str], bool]:
    def check(_log: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status < 500)
        except Exception:
            return False

    return check


def log_ready(marker: str) -> Callable[[str], bool]:
    return lambda log: marker in log


@dataclass
class ServiceSpec:
    name: str
    argv: list[str]
    ready: Callable[[str], bool]
    ready_timeout_s: float = 120.0
    env: dict[str, str] = field(default_factory=dict)
    restart: bool = True
    done_on_success: bool = False  # exit 0 means "finished" (a learner whose run completed), not a crash
    cpus: frozenset[int] | None = None
    """Run the service on these CPUs only (``Settings.pin_cpus``): set in the child before it execs, so every
    process it starts (vLLM's engine core, torch's workers) inherits the affinity."""


@dataclass
class _Running:
    spec: ServiceSpec
    proc: subprocess.Popen
    started_at: float
    tail: list[str] = field(default_factory=list)
    restarts: int = 0
    down_reported: bool = False
    held_reported: bool = False
    pump: threading.Thread | None = None


class Supervisor:
    def __init__(
        self, log_path: Path, env: dict[str, str], echo: bool = True, out: IO[str] | None = None
    ) -> None:
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_file = open(log_path, "a", buffering=1)  # noqa: SIM115 - closed in stop_all
        self.env = env
        self.echo = echo
        self.out = out or sys.stdout
        self.running: dict[str, _Running] = {}
        self.events: list[str] = []
        self.held_port_wait_s = 20.0
        # A dead service's children get this long to exit on their own, then SIGKILL.
        self.orphan_grace_s = 2.0
        self._lock = threading.Lock()

    # --- output ---------------------------------------------------------------------------------------
    def _emit(self, name: str, line: str) -> None:
        color = COLORS[hash(name) % len(COLORS)]
        with self._lock:
            if self.log_file.closed:  # a reader thread draining a stopped child's last lines after stop_all
                return
            self.log_file.write(f"{name:>9} | {line}\n")
            if self.echo:
                self.out.write(
                    f"\x1b[{color}m{name:>9}\x1b[0m | {line}\n"
                    if self.out.isatty()
                    else f"{name:>9} | {line}\n"
                )
                self.out.flush()

    def note(self, line: str) -> None:
        self.events.append(line)
        self._emit("up", line)

    def _pump(self, running: _Running) -> None:
        assert running.proc.stdout is not None
        for raw in running.proc.stdout:
            line = raw.rstrip("\n")
            running.tail.append(line)
            del running.tail[:-400]
            self._emit(running.spec.name, line)

    # --- lifecycle ------------------------------------------------------------------------------------
    def _spawn(self, spec: ServiceSpec, restarts: int = 0) -> _Running:
        proc = subprocess.Popen(
            spec.argv,
            env={**self.env, **spec.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=None if spec.cpus is None else functools.partial(os.sched_setaffinity, 0, spec.cpus),
        )
        running = _Running(spec, proc, time.monotonic(), restarts=restarts)
        running.pump = threading.Thread(
            target=self._pump, args=(running,), daemon=True, name=f"log-{spec.name}"
        )
        running.pump.start()
        self.running[spec.name] = running
        return running

    def start(self, spec: ServiceSpec) -> None:
        """Start ``spec`` and block until it is ready (or raise ``ServiceFailed``)."""
        running = self._spawn(spec)
        self._wait_ready(running)

    def _wait_ready(self, running: _Running) -> None:
        spec = running.spec
        deadline = time.monotonic() + spec.ready_timeout_s
        while time.monotonic() < deadline:
            code = running.proc.poll()
            if code is not None and running.pump is not None:
                # Its last lines may still be in the pipe: read them before judging (on a loaded machine the
                # reader thread runs behind the exit).
                running.pump.join(timeout=5.0)
            finished = code == 0 and spec.done_on_success
            if (code is None or finished) and spec.ready("\n".join(running.tail)):
                # A job that said it was ready and has already finished is started too: poll() lets it go.
                self.note(
                    f"{spec.name} ready in {time.monotonic() - running.started_at:.1f}s (pid {running.proc.pid})"
                )
                return
            if code is not None:
                tail = "\n".join(running.tail[-30:])
                raise ServiceFailed(
                    f"{spec.name} exited with code {running.proc.returncode} while starting:\n{tail}"
                )
            time.sleep(0.2)
        raise ServiceFailed(
            f"{spec.name} not ready after {spec.ready_timeout_s:.0f}s:\n" + "\n".join(running.tail[-30:])
        )

    def poll(self) -> list[str]:
        """Report services that died and restart them; returns the names restarted."""
        restarted = []
        for name, running in list(self.running.items()):
            code = running.proc.poll()
            if code is None:
                continue
            how = f"signal {-code} ({_signal_name(-code)})" if code < 0 else f"code {code}"
            self._end_group(running)
            if not running.spec.restart or (code == 0 and running.spec.done_on_success):
                self.note(f"{name} exited with {how}")
                del self.running[name]
                continue
            if not running.down_reported:
                self.note(
                    f"SERVICE DOWN: {name} exited with {how}; restarting (restart #{running.restarts + 1})"
                )
                running.down_reported = True
            if self._still_answering(running):
                continue  # reported once; retried on the next poll
            time.sleep(min(2.0 * running.restarts, 10.0))
            fresh = self._spawn(running.spec, running.restarts + 1)
            try:
                self._wait_ready(fresh)
                self.note(f"{name} restarted; work in flight resumes from Postgres and the queues")
            except ServiceFailed as exc:
                self.note(f"{name} failed to restart: {exc}")
            restarted.append(name)
        return restarted

    def _end_group(self, running: _Running) -> None:
        """Its main process is gone: end what it left in its process group (orphans keep the group id, which the
        kernel does not reuse while any of them lives), so no old child outlives it into the next instance."""
        if running.down_reported:
            return  # ended on the poll that found it dead
        if left := stop_group(running.proc.pid, grace_s=self.orphan_grace_s):
            self.note(f"{running.spec.name}: processes {left} of its group still there 10 s after SIGKILL")

    def _still_answering(self, running: _Running) -> bool:
        """Whether a dead service's readiness check still passes: its health URL answered by an orphaned child
        that kept the port (a log-marker check never passes on an empty log). A new instance could not bind the
        port and would look ready at once, so wait up to ``held_port_wait_s`` for the holder to go away, then
        say so once and let the next ``poll`` try again."""
        deadline = time.monotonic() + (0.0 if running.held_reported else self.held_port_wait_s)
        while running.spec.ready(""):
            if time.monotonic() >= deadline:
                if not running.held_reported:
                    self.note(
                        f"{running.spec.name} cannot restart: its readiness check still answers after it died "
                        "(an orphaned child process holding its port?); it restarts once that is gone"
                    )
                    running.held_reported = True
                return True
            time.sleep(0.5)
        return False

    def stop(self, name: str, timeout_s: float = 15.0) -> None:
        running = self.running.pop(name, None)
        if running is None or running.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.proc.pid, signal.SIGTERM)
        try:
            running.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.proc.pid, signal.SIGKILL)
            running.proc.wait(5)
        # The service is gone; helpers it left in its process group (e.g. multiprocessing's resource tracker)
        # get a moment to exit, then SIGKILL; the stop returns once none of them is left.
        if left := stop_group(running.proc.pid):
            self.note(f"{name}: processes {left} of its group still there 10 s after SIGKILL")

    def stop_all(self) -> None:
        for name in reversed(list(self.running)):
            self.note(f"stopping {name}")
            self.stop(name)
        with self._lock:
            self.log_file.close()
