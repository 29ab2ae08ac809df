"""The ``harnessrl up`` supervisor with real child processes: readiness, merged logs, crash report + restart,
clean stop, the learner controller as one of ``up``'s services, and the embedded Redis fallback."""

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from services.cli.embedded import redis_reachable, start_redis
from services.cli.supervisor import ServiceFailed, ServiceSpec, Supervisor, http_ready, log_ready
from services.cli.up import settings_env, suite_specs
from tests.fixtures.services import free_port

pytestmark = pytest.mark.integration


def _http_server(port: int) -> list[str]:
    return [sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_ready_kill_report_restart_and_stop(tmp_path: Path) -> None:
    port = free_port()
    sup = Supervisor(tmp_path / "up.log", dict(os.environ), echo=False)
    sup.start(ServiceSpec("web", _http_server(port), http_ready(f"http://127.0.0.1:{port}/")))
    sup.start(
        ServiceSpec(
            "ticker",
            [
                sys.executable,
                "-u",
                "-c",
                "print('ticker ready', flush=True)\nimport time\nwhile True: time.sleep(1)",
            ],
            log_ready("ticker ready"),
        )
    )
    first_pid = sup.running["web"].proc.pid
    os.killpg(first_pid, signal.SIGKILL)
    time.sleep(0.3)
    assert sup.poll() == ["web"]
    assert any("SERVICE DOWN: web exited with signal 9" in e for e in sup.events)
    assert sup.running["web"].proc.pid != first_pid
    assert http_ready(f"http://127.0.0.1:{port}/")("")
    sup.stop_all()
    assert sup.running == {}
    log = (tmp_path / "up.log").read_text()
    assert "ticker | ticker ready" in log and "up | web ready" in log


def test_service_that_dies_while_starting_is_reported_with_its_log(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "up.log", dict(os.environ), echo=False)
    spec = ServiceSpec(
        "broken",
        [sys.executable, "-c", "print('bad config: HARNESSRL_X'); raise SystemExit(3)"],
        log_ready("never"),
    )
    with pytest.raises(ServiceFailed, match="broken exited with code 3") as info:
        sup.start(spec)
    assert "bad config: HARNESSRL_X" in str(info.value)
    sup.stop_all()


def test_finished_service_is_not_restarted(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "up.log", dict(os.environ), echo=False)
    sup.start(
        ServiceSpec(
            "learner-x",
            [sys.executable, "-u", "-c", "print('learner ready'); import time; time.sleep(0.5)"],
            log_ready("learner ready"),
            done_on_success=True,
        )
    )
    time.sleep(1.0)
    assert sup.poll() == []
    assert "learner-x" not in sup.running
    sup.stop_all()


@pytest.mark.slow
def test_up_starts_learners_through_the_controller_and_its_stop_ends_them(  # type: ignore[no-untyped-def]
    settings, store, redis_client, tiny_model_dir, tmp_path: Path
) -> None:
    """``up``'s ``learners`` service is the learner controller: a training run gets its learner without anyone
    starting one, and stopping the suite ends the learner too."""
    from shared.db import make_engine, session_factory
    from shared.ids import new_id
    from shared.scratch_db import scratch_database
    from tests.fixtures.learner import LearnerRun

    [spec] = [spec for spec in suite_specs(settings) if spec.name == "learners"]
    with scratch_database(settings.database_url, prefix="harnessrl_up_learners") as url:
        engine = make_engine(url)
        scratch = settings.model_copy(update={"database_url": url})
        run = LearnerRun(
            session_factory(engine), store, redis_client, new_id("run"), {"model_dir": str(tiny_model_dir)}
        )
        sup = Supervisor(tmp_path / "up.log", settings_env(scratch), echo=False)
        try:
            sup.start(spec)
            started = f"started the learner of run {run.run_id}, pid "
            deadline = time.monotonic() + 60
            while started not in "\n".join(sup.running["learners"].tail) and time.monotonic() < deadline:
                time.sleep(0.5)
            log = "\n".join(sup.running["learners"].tail)
            match = re.search(re.escape(started) + r"(\d+)", log)
            assert match, log
            learner_pid = int(match.group(1))
            os.kill(learner_pid, 0)  # running
        finally:
            sup.stop_all()
            engine.dispose()
    with pytest.raises(ProcessLookupError):
        os.kill(learner_pid, 0)


def test_embedded_redis_starts_when_none_is_configured(tmp_path: Path) -> None:
    port = free_port()
    assert not redis_reachable(f"redis://127.0.0.1:{port}/0")
    embedded = start_redis(tmp_path, port)
    try:
        import redis

        assert redis.Redis.from_url(embedded.url).ping()
    finally:
        embedded.stop()
    assert not redis_reachable(embedded.url)


def test_embedded_postgres_starts_and_serves_the_schema(data_dir: Path) -> None:
    from services.cli.embedded import start_postgres
    from shared import migrate

    embedded = start_postgres(data_dir / "embedded-pg-test", free_port())
    try:
        migrate.upgrade(embedded.url)
        import psycopg

        with psycopg.connect(embedded.url.replace("+psycopg", "")) as conn:
            assert conn.execute("SELECT count(*) FROM trajectories").fetchone() == (0,)
    finally:
        embedded.stop()
