"""``harnessrl up``: the whole suite as processes on one machine (the embedded default).

Order: Postgres and Redis (the configured ones, or embedded ones when none is reachable) → migrations → the
tiny model if no model is configured → inference (vLLM + weight updater) → gateway → api (with the step
scheduler) → runner and grader workers → the learner controller (``harnessrl serve learners``,
``services/learner/controller.py``), which keeps one learner running per training run as runs appear, restarts
one that dies and ends it with its run; evals have none. With ``Settings.pin_cpus`` inference and the learners
run on separate halves of the CPUs (``cpu_split``). Every service
is a child process with its own readiness check; their logs are merged with a name prefix into the console and
``<data_dir>/logs/up.log``. A service that dies is reported and restarted; work in flight resumes from Postgres
and the queues (rollout and grading tasks are idempotent, a learner resumes from its checkpoint). Ctrl-C,
SIGTERM or SIGHUP stop everything in reverse order (``stop_on_signals``: SIGINT too when a shell started ``up`` in
the background, where SIGINT arrives ignored), embedded Postgres and Redis last.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

from services.cli.embedded import (
    EmbeddedProcess,
    postgres_reachable,
    redis_reachable,
    start_postgres,
    start_redis,
)
from services.cli.supervisor import ServiceSpec, Supervisor, http_ready, log_ready
from shared.settings import Settings, check_api_exposure, get_settings

EMBEDDED_PG_PORT = 8310
EMBEDDED_REDIS_PORT = 8311


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "services.cli.main", *args]


def settings_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in settings.model_dump(mode="json").items():
        if value is not None:
            env[f"HARNESSRL_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cpu_split(settings: Settings) -> tuple[frozenset[int], frozenset[int]] | None:
    """With ``Settings.pin_cpus``: (inference's CPUs, the learners' CPUs), the first and second half of the CPUs
    this process may run on (inference gets the odd one); None when the setting is off."""
    if not settings.pin_cpus:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise click.ClickException(
            f"HARNESSRL_PIN_CPUS needs at least 2 CPUs to give inference and the learner their own; this process "
            f"may use {len(cpus)}"
        )
    half = (len(cpus) + 1) // 2
    return frozenset(cpus[:half]), frozenset(cpus[half:])


def suite_specs(settings: Settings) -> list[ServiceSpec]:
    base = f"http://{settings.host}"
    split = cpu_split(settings)
    return [
        ServiceSpec(
            "inference",
            _cli("serve", "inference", "--model", str(settings.resolved_model_dir)),
            http_ready(f"{base}:{settings.inference_port}/health"),
            ready_timeout_s=300,
            cpus=split[0] if split else None,
        ),
        ServiceSpec(
            "gateway", _cli("serve", "gateway"), http_ready(f"{base}:{settings.gateway_port}/healthz")
        ),
        ServiceSpec("api", _cli("serve", "api"), http_ready(f"{base}:{settings.api_port}/health")),
        ServiceSpec(
            "runner",
            _cli("worker", "runner", "-c", str(settings.runner_concurrency)),
            log_ready("ready."),
            ready_timeout_s=120,
        ),
        ServiceSpec(
            "grader",
            _cli("worker", "grader", "-c", str(settings.grader_concurrency)),
            log_ready("ready."),
            ready_timeout_s=120,
        ),
        # The learners it starts inherit its CPUs (the affinity is set before exec).
        ServiceSpec(
            "learners",
            _cli("serve", "learners"),
            log_ready("learner controller ready"),
            cpus=split[1] if split else None,
        ),
    ]


@contextmanager
def infrastructure(settings: Settings, note) -> Iterator[Settings]:  # type: ignore[no-untyped-def]
    """Yield settings whose Postgres and Redis are reachable, starting embedded ones where needed."""
    started: list[EmbeddedProcess] = []
    updates: dict[str, object] = {}
    try:
        if not postgres_reachable(settings.database_url):
            note(f"no Postgres at {settings.database_url}; starting the embedded one")
            pg = start_postgres(settings.data_dir, EMBEDDED_PG_PORT)
            started.append(pg)
            updates["database_url"] = pg.url
        if not redis_reachable(settings.redis_url):
            note(f"no Redis at {settings.redis_url}; starting the embedded one")
            rd = start_redis(settings.data_dir, EMBEDDED_REDIS_PORT)
            started.append(rd)
            updates["redis_url"] = rd.url
        yield settings.model_copy(update=updates)
    finally:
        for proc in reversed(started):
            proc.stop()


def ensure_database(settings: Settings) -> None:
    """Create the configured database if the server has none by that name, then migrate it."""
    import psycopg
    from sqlalchemy import make_url

    from shared import migrate

    url = make_url(settings.database_url)
    admin = url.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (url.database,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{url.database}"')
    migrate.upgrade(settings.database_url)


def ensure_model(settings: Settings, note) -> None:  # type: ignore[no-untyped-def]
    model_dir = settings.resolved_model_dir
    if (model_dir / "config.json").exists():
        return
    if settings.model_dir is not None:
        raise click.ClickException(f"HARNESSRL_MODEL_DIR={model_dir} has no config.json")
    from services.inference.tiny_model import build_tiny_model

    note(f"building the tiny model into {model_dir}")
    build_tiny_model(model_dir)


class Suite:
    """The running suite under its supervisor."""

    def __init__(self, settings: Settings, echo: bool = True) -> None:
        self.settings = settings
        self.supervisor = Supervisor(settings.data_dir / "logs" / "up.log", settings_env(settings), echo=echo)

    def start(self) -> None:
        if split := cpu_split(self.settings):
            self.supervisor.note(
                f"pinning inference to CPUs {sorted(split[0])} and learners to CPUs {sorted(split[1])}"
            )
        for spec in suite_specs(self.settings):
            self.supervisor.start(spec)

    def tick(self) -> None:
        """Restart dead services (the learner controller among them starts, restarts and ends the learners)."""
        self.supervisor.poll()

    def stop(self) -> None:
        self.supervisor.stop_all()


class Shutdown(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP, SIGINT) raised in the main thread, handled wherever Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_stop_requested: int | None = None
"""The stop signal received, if any. The handler's ``Shutdown`` is raised wherever the main thread happens to be, and
Python swallows an exception raised inside a weakref callback or a ``__del__`` (CI once caught it in
``WeakValueDictionary``'s ``remove``): ``up`` then ran on with every later signal ignored. ``raise_if_stopping``
raises it again from a place where it propagates."""


def raise_if_stopping() -> None:
    """Raise ``Shutdown`` if a stop signal came whose own ``Shutdown`` was lost (see ``_stop_requested``)."""
    if _stop_requested is not None:
        raise Shutdown(_stop_requested)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the suite runs, each stop signal raises ``Shutdown`` once; later ones are ignored so that the stop
    (every service SIGTERMed, SIGKILLed after its grace period, embedded databases last) runs to its end. SIGINT
    is handled explicitly, since a shell gives a background job SIGINT ignored and Python then never raises
    KeyboardInterrupt. Outside the main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        global _stop_requested
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        _stop_requested = signum
        raise Shutdown(signum)

    global _stop_requested
    _stop_requested = None
    previous = {number: signal.signal(number, handler) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


@contextmanager
def running_suite(settings: Settings, echo: bool = True) -> Iterator[Suite]:
    def note(line: str) -> None:
        click.echo(f"{'up':>9} | {line}")

    with stop_on_signals(), infrastructure(settings, note) as ready_settings:
        ensure_database(ready_settings)
        ensure_model(ready_settings, note)
        ready_settings.data_dir.mkdir(parents=True, exist_ok=True)
        suite = Suite(ready_settings, echo=echo)
        try:
            suite.start()
            raise_if_stopping()
            yield suite
        finally:
            suite.stop()


@click.command()
@click.option(
    "--quiet", is_flag=True, help="Do not echo service logs (they still go to <data_dir>/logs/up.log)."
)
def up(quiet: bool) -> None:
    """Start the whole suite on this machine; Ctrl-C (or SIGTERM, SIGHUP) stops it."""
    settings = get_settings()
    check_api_exposure(settings.host, settings.api_token)  # before any service starts
    started = time.monotonic()
    try:
        with running_suite(settings, echo=not quiet) as suite:
            s = suite.settings
            click.echo(
                f"harnessrl is up: api http://{s.host}:{s.api_port} (token from HARNESSRL_API_TOKEN), "
                f"gateway http://{s.host}:{s.gateway_port}, logs {s.data_dir / 'logs' / 'up.log'}"
            )
            while True:
                raise_if_stopping()
                suite.tick()
                time.sleep(2)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal (Shutdown): every service is stopped by now
        why = exc.args[0] if isinstance(exc, Shutdown) else "SIGINT"
        click.echo(f"{'up':>9} | stopped on {why} after {time.monotonic() - started:.0f}s")
