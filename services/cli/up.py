"""``harnessrl up``: the whole suite as processes on one machine (the embedded default).

Order: Postgres and Redis (the configured ones, or embedded ones when none is reachable) → migrations → the
tiny model if no model is configured → inference (vLLM + weight updater) → gateway → api (with the step
scheduler) → runner and grader workers → one learner per running run (started as runs appear). Every service
is a child process with its own readiness check; their logs are merged with a name prefix into the console and
``<data_dir>/logs/up.log``. A service that dies is reported and restarted; work in flight resumes from Postgres
and the queues (rollout and grading tasks are idempotent, the learner resumes from its checkpoint). Ctrl-C stops
everything in reverse order.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from services.cli.embedded import (
    EmbeddedProcess,
    postgres_reachable,
    redis_reachable,
    start_postgres,
    start_redis,
)
from services.cli.supervisor import ServiceSpec, Supervisor, http_ready, log_ready
from shared.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

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


def suite_specs(settings: Settings) -> list[ServiceSpec]:
    base = f"http://{settings.host}"
    return [
        ServiceSpec(
            "inference",
            _cli("serve", "inference", "--model", str(settings.resolved_model_dir)),
            http_ready(f"{base}:{settings.inference_port}/health"),
            ready_timeout_s=300,
        ),
        ServiceSpec(
            "gateway", _cli("serve", "gateway"), http_ready(f"{base}:{settings.gateway_port}/healthz")
        ),
        ServiceSpec("api", _cli("serve", "api"), http_ready(f"{base}:{settings.api_port}/health")),
        ServiceSpec("runner", _cli("worker", "runner"), log_ready("ready."), ready_timeout_s=120),
        ServiceSpec("grader", _cli("worker", "grader"), log_ready("ready."), ready_timeout_s=120),
    ]


def learner_spec(run_id: str) -> ServiceSpec:
    return ServiceSpec(
        f"learner-{run_id[-6:]}",
        _cli("serve", "learner", "--run", run_id),
        log_ready("learner ready"),
        ready_timeout_s=180,
        done_on_success=True,
    )


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
    """The running suite: supervisor + learner manager."""

    def __init__(self, settings: Settings, echo: bool = True) -> None:
        self.settings = settings
        self.supervisor = Supervisor(settings.data_dir / "logs" / "up.log", settings_env(settings), echo=echo)
        self._engine: Engine | None = None

    def start(self) -> None:
        for spec in suite_specs(self.settings):
            self.supervisor.start(spec)

    def _running_runs(self) -> list[str]:
        from sqlalchemy import select

        from shared.db import make_engine
        from shared.models import Run

        if self._engine is None:
            self._engine = make_engine(self.settings.database_url, pool_size=1)
        with self._engine.connect() as conn:
            return list(conn.execute(select(Run.id).where(Run.status.in_(("running", "pending")))).scalars())

    def tick(self) -> None:
        """Restart dead services and start a learner for every running run that has none."""
        self.supervisor.poll()
        for run_id in self._running_runs():
            spec = learner_spec(run_id)
            if spec.name not in self.supervisor.running:
                self.supervisor.start(spec)

    def stop(self) -> None:
        self.supervisor.stop_all()
        if self._engine is not None:
            self._engine.dispose()


@contextmanager
def running_suite(settings: Settings, echo: bool = True) -> Iterator[Suite]:
    def note(line: str) -> None:
        click.echo(f"{'up':>9} | {line}")

    with infrastructure(settings, note) as ready_settings:
        ensure_database(ready_settings)
        ensure_model(ready_settings, note)
        ready_settings.data_dir.mkdir(parents=True, exist_ok=True)
        suite = Suite(ready_settings, echo=echo)
        try:
            suite.start()
            yield suite
        finally:
            suite.stop()


@click.command()
@click.option(
    "--quiet", is_flag=True, help="Do not echo service logs (they still go to <data_dir>/logs/up.log)."
)
def up(quiet: bool) -> None:
    """Start the whole suite on this machine; Ctrl-C stops it."""
    settings = get_settings()
    with running_suite(settings, echo=not quiet) as suite:
        s = suite.settings
        click.echo(
            f"harnessrl is up: api http://{s.host}:{s.api_port} (token from HARNESSRL_API_TOKEN), "
            f"gateway http://{s.host}:{s.gateway_port}, logs {s.data_dir / 'logs' / 'up.log'}"
        )
        try:
            while True:
                suite.tick()
                time.sleep(2)
        except KeyboardInterrupt:
            click.echo("stopping…")
