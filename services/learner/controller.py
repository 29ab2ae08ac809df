"""``harnessrl serve learners``: the learner controller, one always-on process that keeps one learner
(``harnessrl serve learner --run ID``) running for every training run that needs one.

Who runs it: the compose ``learners`` service, and ``harnessrl up`` as one of its services; nothing else
starts learners (the compose ``train`` profile's one-container-per-run learner aside).

Every ``tick`` (2 s) it reads the training and SFT runs that need a learner (``running``, ``pending`` or ``stopping``,
oldest first) from Postgres and then:

- starts a learner for each such run that has none, up to ``Settings.max_learners`` side by side (the others
  wait their turn, oldest first);
- lets a learner that exits 0 go (its run is over: the learner notices within seconds and exits on its own),
  and ends (SIGTERM, then SIGKILL) a learner whose run has been over for ``stop_grace_s`` and is still there;
- restarts a learner that died, after a backoff (2, 4, 8 ... 60 s): its checkpoint and replay make the resumed
  run exactly the one that would have run uninterrupted. After ``Settings.learner_max_failures`` deaths in a
  row (a learner that ran ``healthy_after_s`` starts the count again) the run is marked ``failed`` with the
  learner's exit and last log line as ``runs.error``, instead of a crash loop.

Concurrency: the main thread owns every ``Learner`` record and all starting and stopping; one reader thread per
learner copies its output, prefixed with ``learner-<run id tail>``, to this process's stdout. Each learner runs
in a session of its own (so ending it ends whatever it started) and gets SIGKILL if the controller dies
(``PR_SET_PDEATHSIG``), so no learner outlives its controller into a second one's. SIGTERM or SIGINT stop every
learner (SIGTERM, SIGKILL after ``stop_timeout_s``) and then the controller.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from shared.statuses import LEARNER_KINDS, RUN_FINISHED, RunStatus

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from shared.settings import Settings

NEEDS_LEARNER = (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.STOPPING)
BACKOFF_FIRST_S, BACKOFF_MAX_S = 2.0, 60.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the learner before exec: SIGKILL it when the controller's thread that started it exits."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def learner_argv(run_id: str) -> list[str]:
    return [sys.executable, "-m", "services.cli.main", "serve", "learner", "--run", run_id]


@dataclass(kw_only=True)
class Learner:
    """One run's learner: the process now running (None while it waits for a restart) and its failures."""

    run_id: str
    proc: subprocess.Popen[str] | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0
    over_since: float | None = None
    tail: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"learner-{self.run_id[-6:]}"


class LearnerController:
    def __init__(
        self,
        settings: Settings,
        env: dict[str, str] | None = None,
        *,
        stop_grace_s: float = 30.0,
        stop_timeout_s: float = 20.0,
        healthy_after_s: float = 300.0,
    ) -> None:
        self.settings = settings
        self.env = dict(os.environ if env is None else env)
        self.stop_grace_s, self.stop_timeout_s, self.healthy_after_s = (
            stop_grace_s,
            stop_timeout_s,
            healthy_after_s,
        )
        self.learners: dict[str, Learner] = {}
        self._engine: Engine | None = None
        self._out_lock = threading.Lock()

    # --- the database -----------------------------------------------------------------------------------
    def _db(self) -> Engine:
        from shared.db import make_engine

        if self._engine is None:
            self._engine = make_engine(self.settings.database_url, pool_size=1)
        return self._engine

    def runs_needing_learners(self) -> list[str]:
        """Training and SFT runs that need a learner, oldest first (evals have none: nothing of them is trained
        on)."""
        from sqlalchemy import select

        from shared.models import Run

        query = (
            select(Run.id)
            .where(Run.kind.in_(LEARNER_KINDS), Run.status.in_(NEEDS_LEARNER))
            .order_by(Run.created_at, Run.id)
        )
        with self._db().connect() as conn:
            return list(conn.execute(query).scalars())

    def _fail_run(self, learner: Learner, how: str) -> None:
        from sqlalchemy import update

        from shared.models import Run

        last = next((line for line in reversed(learner.tail) if line.strip()), "(no output)")
        error = (
            f"its learner died {learner.failures} times in a row (last: {how}; its last line: {last[-300:]})"
        )
        with self._db().begin() as conn:
            conn.execute(
                update(Run)
                .where(Run.id == learner.run_id, Run.status.not_in(RUN_FINISHED))
                .values(status=RunStatus.FAILED, error=error)
            )
        self.say(f"LEARNER FAILING: run {learner.run_id} marked failed: {error}")

    # --- output -----------------------------------------------------------------------------------------
    def say(self, line: str, name: str = "learners") -> None:
        with self._out_lock:
            sys.stdout.write(f"{name:>15} | {line}\n")
            sys.stdout.flush()

    def _pump(self, learner: Learner, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            learner.tail.append(line)
            del learner.tail[:-50]
            self.say(line, learner.name)

    # --- lifecycle --------------------------------------------------------------------------------------
    def _start(self, learner: Learner) -> None:
        proc = subprocess.Popen(
            learner_argv(learner.run_id),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        learner.proc, learner.started_at, learner.over_since = proc, time.monotonic(), None
        threading.Thread(target=self._pump, args=(learner, proc), daemon=True, name=learner.name).start()
        again = f" (restart after {learner.failures} failure(s))" if learner.failures else ""
        self.say(f"started the learner of run {learner.run_id}, pid {proc.pid}{again}")

    def _end(self, learner: Learner) -> None:
        """SIGTERM the learner's session, SIGKILL it after ``stop_timeout_s``; return once it is gone."""
        proc = learner.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left in its session
        learner.proc = None

    def _reap(self, learner: Learner, needed: bool) -> bool:
        """Handle a learner whose process exited; returns whether to keep its record."""
        assert learner.proc is not None
        code = learner.proc.returncode
        with contextlib.suppress(ProcessLookupError):
            os.killpg(learner.proc.pid, signal.SIGKILL)  # what it left in its session
        learner.proc = None
        if code == 0 or not needed:
            self.say(f"the learner of run {learner.run_id} exited with code {code}; its run is over")
            # Exit 0 comes with the run's end, which the list read before this pass may not show yet: the next
            # pass reads it again and starts the learner again only if the run still needs one.
            learner.restart_at = time.monotonic() + BACKOFF_FIRST_S
            return needed
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        ran_s = time.monotonic() - learner.started_at
        learner.failures = 1 if ran_s >= self.healthy_after_s else learner.failures + 1
        if learner.failures >= self.settings.learner_max_failures:
            self._fail_run(learner, how)
            return False
        backoff = min(BACKOFF_FIRST_S * 2 ** (learner.failures - 1), BACKOFF_MAX_S)
        learner.restart_at = time.monotonic() + backoff
        self.say(
            f"LEARNER DOWN: the learner of run {learner.run_id} died ({how}) after {ran_s:.0f}s; restarting in "
            f"{backoff:.0f}s (failure {learner.failures} of {self.settings.learner_max_failures})"
        )
        return True

    def tick(self) -> None:
        """One pass: reap, end the learners of finished runs, start the ones that are due (see the module doc)."""
        needed = self.runs_needing_learners()
        now = time.monotonic()
        for run_id, learner in list(self.learners.items()):
            if learner.proc is not None and learner.proc.poll() is not None:
                if not self._reap(learner, run_id in needed):
                    del self.learners[run_id]
            elif run_id not in needed:
                learner.over_since = learner.over_since or now
                if learner.proc is None or now - learner.over_since >= self.stop_grace_s:
                    if learner.proc is not None:
                        self.say(f"run {run_id} is over and its learner still runs; ending it")
                        self._end(learner)
                    del self.learners[run_id]
        for run_id in needed:
            learner = self.learners.setdefault(run_id, Learner(run_id=run_id))
            due = learner.proc is None and learner.restart_at <= now
            # A learner waiting out its backoff keeps its slot; a run's first start waits for a free one.
            if due and (learner.started_at > 0 or self.slots_held() < self.settings.max_learners):
                self._start(learner)
        for run_id in [r for r, one in self.learners.items() if one.proc is None and r not in needed]:
            del self.learners[run_id]

    def running(self) -> int:
        return sum(1 for learner in self.learners.values() if learner.proc is not None)

    def slots_held(self) -> int:
        """Learners running or waiting to be restarted (the runs waiting for a first start hold none)."""
        return sum(1 for learner in self.learners.values() if learner.started_at > 0)

    def pids(self) -> dict[str, int]:
        """Run id → pid of its learner process, for the ones running now."""
        return {run_id: one.proc.pid for run_id, one in self.learners.items() if one.proc is not None}

    def stop_all(self) -> None:
        """End every learner at once (SIGTERM to all, then wait), then close the database engine."""
        for learner in self.learners.values():
            if learner.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(learner.proc.pid, signal.SIGTERM)
        for learner in self.learners.values():
            self._end(learner)
        self.learners.clear()
        if self._engine is not None:
            self._engine.dispose()


def _tick_through_outages(controller: LearnerController) -> None:
    """A pass, where a Postgres restart only delays the next one: the learners keep running meanwhile."""
    from sqlalchemy.exc import OperationalError

    try:
        controller.tick()
    except OperationalError as exc:
        controller.say(
            f"Postgres unreachable ({str(exc).splitlines()[0]}); the learners run on, trying again"
        )


class _Stop(Exception):
    pass


def _raise_stop(signum: int, _frame: object) -> None:
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_IGN)
    raise _Stop(signal.Signals(signum).name)


@click.command("learners")
@click.option("--every-s", type=float, default=2.0, show_default=True, help="How often to look at the runs.")
@click.option(
    "--heartbeat",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Touch this file after every pass (a container healthcheck reads its age).",
)
def serve_learners(every_s: float, heartbeat: Path | None) -> None:
    """Keep one learner running for every training run that needs one (HARNESSRL_MAX_LEARNERS at most)."""
    from shared.settings import get_settings

    settings = get_settings()
    controller = LearnerController(settings)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    try:
        controller.tick()
        controller.say(f"learner controller ready: up to {settings.max_learners} learner(s) side by side")
        while True:
            if heartbeat is not None:
                heartbeat.touch()
            time.sleep(every_s)
            _tick_through_outages(controller)
    except _Stop as exc:
        controller.say(f"stopping on {exc}: ending {controller.running()} learner(s)")
    finally:
        controller.stop_all()
