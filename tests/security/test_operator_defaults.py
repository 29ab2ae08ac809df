"""Operator defaults (issue 36, item 6), each driven through the real CLI as a subprocess against the real Postgres:

- ``harnessrl serve api`` and ``harnessrl up`` refuse to listen beyond loopback with the shipped or a short API
  token (one line, exit 2, nothing started); loopback keeps the default, which tests and the demo use;
- outside ``HARNESSRL_PROFILE=dev`` every service refuses the secrets this repository ships (compose sets
  ``production`` unless ``compose/.env`` says ``dev``);
- ``harnessrl sql`` cannot write, whatever the string holds (multi-statement strings that end its read-only
  transaction, ``SET TRANSACTION READ WRITE``, ``default_transaction_read_only = off``), psql opens read-only, and
  the password never appears in psql's argv;
- the supervisor of ``harnessrl up`` ends a dead service's whole process group before it restarts the service.

The compose side (the runner's and grader's seccomp profile and capabilities) is checked in
``tests/unit/test_operator_defaults.py`` and, on a real stack, in ``tests/compose``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from services.cli.supervisor import ServiceSpec, Supervisor, log_ready
from tests.fixtures.services import PG_ADMIN_URL, REPO_ROOT, free_port

pytestmark = [pytest.mark.e2e]

LONG_TOKEN = "operator-chosen-token-0123456789"
EXIT_WAIT_S = 90.0  # the CLI imports the api's dependencies before it checks (seconds on a loaded machine)


def cli_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a CLI subprocess: none of the caller's HARNESSRL_* settings, no .env (cwd tmp_path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESSRL_", "PG"))}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        OMP_NUM_THREADS="1",
        HARNESSRL_DATA_DIR=str(tmp_path / "data"),
        HARNESSRL_DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:1/unreachable",
        HARNESSRL_REDIS_URL="redis://127.0.0.1:1/0",
    )
    env.update({f"HARNESSRL_{name.upper()}": value for name, value in settings.items()})
    return env


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_cli(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``harnessrl ARGV`` in a process group of its own, its stderr captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_until_exit(argv: list[str], env: dict[str, str], cwd: Path, port: int) -> tuple[int, str]:
    """Run the CLI; its exit status and stderr. Fails the test if it starts listening on ``port`` or keeps running
    (a refused start exits at once); the process group is ended either way."""
    proc = start_cli(argv, env, cwd)
    try:
        deadline = time.monotonic() + EXIT_WAIT_S
        while proc.poll() is None:
            assert not listening(port), f"`harnessrl {' '.join(argv)}` started listening on port {port}"
            assert time.monotonic() < deadline, (
                f"`harnessrl {' '.join(argv)}` still running after {EXIT_WAIT_S} s"
            )
            time.sleep(0.2)
        assert proc.stderr is not None
        return proc.returncode, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# --- the API's bind ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "token", "problem"),
    [
        ("0.0.0.0", None, "the shipped default token (dev-token)"),
        ("0.0.0.0", "short-token", "a token of 11 characters"),
        ("::", "dev-token", "the shipped default token (dev-token)"),
    ],
    ids=["0.0.0.0-default", "0.0.0.0-short", "ipv6-any-default"],
)
def test_serve_api_refuses_a_non_loopback_bind_with_a_weak_token(
    tmp_path: Path, host: str, token: str | None, problem: str
) -> None:
    port = free_port()
    env = cli_env(tmp_path, **({"api_token": token} if token is not None else {}))
    code, stderr = run_until_exit(["serve", "api", "--host", host, "--port", str(port)], env, tmp_path, port)
    assert code == 2
    assert one_line(stderr) == (
        f"harnessrl: refusing to serve the API on {host} with {problem}: set HARNESSRL_API_TOKEN to a secret of 16+ "
        "characters, or bind 127.0.0.1"
    )


def test_up_refuses_a_non_loopback_host_with_the_default_token_before_starting_anything(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = cli_env(tmp_path, host="0.0.0.0", api_port=str(port), model_dir=str(tmp_path / "no-model"))
    code, stderr = run_until_exit(["up", "--quiet"], env, tmp_path, port)
    assert code == 2
    assert one_line(stderr).startswith(
        "harnessrl: refusing to serve the API on 0.0.0.0 with the shipped default"
    )
    assert not (tmp_path / "data" / "logs" / "up.log").exists(), "up started services"


@pytest.fixture
def api_db(pg_url: str, redis_url: str) -> dict[str, str]:
    return {"database_url": pg_url, "redis_url": redis_url}


def serve_until_healthy(argv: list[str], env: dict[str, str], cwd: Path, health_url: str) -> None:
    proc = start_cli(argv, env, cwd)
    try:
        deadline = time.monotonic() + EXIT_WAIT_S
        while True:
            assert proc.poll() is None, f"the api exited: {proc.stderr.read() if proc.stderr else ''}"
            try:
                with urllib.request.urlopen(health_url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, "the api did not answer /health"
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_loopback_keeps_the_default_token_and_a_long_token_may_listen_anywhere(
    tmp_path: Path, api_db: dict[str, str]
) -> None:
    """What the refusal must leave working (tests, the demo, a deployment with its own token)."""
    port = free_port()
    env = cli_env(tmp_path, **api_db)
    serve_until_healthy(
        ["serve", "api", "--host", "127.0.0.1", "--port", str(port), "--no-scheduler"],
        env,
        tmp_path,
        f"http://127.0.0.1:{port}/health",
    )
    env = cli_env(tmp_path, api_token=LONG_TOKEN, **api_db)
    serve_until_healthy(
        ["serve", "api", "--host", "0.0.0.0", "--port", str(port), "--no-scheduler"],
        env,
        tmp_path,
        f"http://127.0.0.1:{port}/health",
    )


# --- shipped secrets outside the dev profile ----------------------------------------------------------------------

COMPOSE_DEFAULTS = {
    # compose/docker-compose.yml's defaults, with the operator's own API token
    "api_token": LONG_TOKEN,
    "object_store_url": "s3://harnessrl",
    "s3_access_key": "harnessrl",
    "s3_secret_key": "harnessrl-secret",
    "database_url": "postgresql+psycopg://harnessrl:harnessrl@127.0.0.1:1/harnessrl",
}


@pytest.mark.parametrize(
    ("override", "setting"),
    [
        ({}, "HARNESSRL_S3_SECRET_KEY"),
        ({"s3_secret_key": "operator-s3-secret"}, "HARNESSRL_DATABASE_URL"),
        (
            {
                "s3_secret_key": "operator-s3-secret",
                "database_url": "postgresql+psycopg://harnessrl:operator-pw@127.0.0.1:1/h",
                "api_token": "dev-token",
            },
            "HARNESSRL_API_TOKEN",
        ),
    ],
    ids=["s3-secret", "postgres-password", "api-token"],
)
def test_production_profile_refuses_the_shipped_secrets(
    tmp_path: Path, override: dict[str, str], setting: str
) -> None:
    port = free_port()
    env = cli_env(tmp_path, profile="production", **{**COMPOSE_DEFAULTS, **override})
    code, stderr = run_until_exit(
        ["serve", "api", "--host", "127.0.0.1", "--port", str(port)], env, tmp_path, port
    )
    assert code == 2
    line = one_line(stderr)
    assert line.startswith(f"harnessrl: invalid setting {setting}: "), line
    assert "in profile production" in line and "HARNESSRL_PROFILE=dev" in line, line
    assert "harnessrl-secret" not in line and "operator" not in line, "the message must not echo a secret"


# --- harnessrl sql ------------------------------------------------------------------------------------------------


@pytest.fixture
def sql_db() -> Iterator[str]:
    """A database of its own: one table ``runs`` with one row."""
    name = f"harnessrl_sqlro_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (id text PRIMARY KEY)")
        conn.execute("INSERT INTO runs VALUES ('run_1')")
    try:
        yield url.replace("postgresql://", "postgresql+psycopg://")
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_state(database_url: str) -> tuple[list[str], list[str], str]:
    """Its tables, the rows of ``runs`` and the database-wide default of ``default_transaction_read_only``."""
    with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        ]
        rows = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id")] if "runs" in tables else []
        [[read_only]] = conn.execute("SHOW default_transaction_read_only").fetchall()
    return tables, rows, read_only


def harnessrl_sql(
    database_url: str, tmp_path: Path, *args: str, stdin: str | None = None, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = cli_env(tmp_path, database_url=database_url)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", "sql", *args],
        env=env,
        cwd=tmp_path,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


WRITES = {
    "commit-then-drop": "COMMIT; DROP TABLE runs",
    "commit-then-insert": "COMMIT; INSERT INTO runs VALUES ('forged')",
    "set-transaction-read-write": "SET TRANSACTION READ WRITE; DELETE FROM runs; COMMIT",
    "default-read-only-off": "COMMIT; SET default_transaction_read_only = off; CREATE TABLE planted (x int)",
    "begin-read-write": "ROLLBACK; BEGIN READ WRITE; INSERT INTO runs VALUES ('forged'); COMMIT",
    "session-read-write": (
        "COMMIT; SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; UPDATE runs SET id = 'forged'"
    ),
}


@pytest.mark.parametrize("query", list(WRITES.values()), ids=list(WRITES))
def test_sql_cannot_write_whatever_the_string_holds(sql_db: str, tmp_path: Path, query: str) -> None:
    before = database_state(sql_db)
    assert before == (["runs"], ["run_1"], "off")
    result = harnessrl_sql(sql_db, tmp_path, query)
    assert database_state(sql_db) == before, (
        f"`harnessrl sql {query!r}` wrote: {result.stdout}{result.stderr}"
    )
    assert result.returncode == 1, result
    assert one_line(result.stderr).startswith("harnessrl sql: cannot insert multiple commands"), result.stderr
    # A read-only query still answers.
    counted = harnessrl_sql(sql_db, tmp_path, "SELECT count(*) AS n FROM runs", "--json")
    assert counted.returncode == 0 and counted.stdout.strip() == '{"n": 1}', counted


def test_psql_opens_read_only(sql_db: str, tmp_path: Path) -> None:
    """``harnessrl sql`` without a query execs psql; a statement piped into it cannot write."""
    result = harnessrl_sql(sql_db, tmp_path, stdin="DROP TABLE runs;\n")
    assert "read-only transaction" in result.stderr, result
    assert database_state(sql_db) == (["runs"], ["run_1"], "off")


def test_psql_gets_its_password_from_the_environment_never_argv(tmp_path: Path) -> None:
    """argv is world-readable (``/proc/PID/cmdline``, ``ps``); the environment is the caller's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "psql-call.txt"
    fake_psql = bin_dir / "psql"  # records how it was called; no connection is made
    fake_psql.write_text(
        "#!/bin/sh\n"
        f'{{ printf "argv:%s\\n" "$*"; printf "PGPASSWORD:%s\\n" "$PGPASSWORD"; printf "PGOPTIONS:%s\\n" "$PGOPTIONS"; }}'
        f" > {record}\n"
    )
    fake_psql.chmod(fake_psql.stat().st_mode | stat.S_IXUSR)
    url = "postgresql+psycopg://harnessrl:pw-Secret-42@127.0.0.1:5432/harnessrl"
    result = harnessrl_sql(url, tmp_path, path=f"{bin_dir}:{os.environ['PATH']}")
    assert result.returncode == 0, result
    call = dict(line.split(":", 1) for line in record.read_text().splitlines())
    assert "pw-Secret-42" not in call["argv"], call
    assert call["argv"] == "postgresql://harnessrl@127.0.0.1:5432/harnessrl"
    assert call["PGPASSWORD"] == "pw-Secret-42"
    assert "-c default_transaction_read_only=on" in call["PGOPTIONS"]


# --- the supervisor -----------------------------------------------------------------------------------------------

ORPHANING_SERVICE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "a").write(f"{child.pid}\\n")
print("ready", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_dead_service_s_process_group_is_ended_before_its_restart(tmp_path: Path) -> None:
    """The service's main process dies (SIGKILL to it alone), leaving its child in its process group; the restart
    must not run beside that child."""
    children = tmp_path / "children.txt"
    sup = Supervisor(tmp_path / "up.log", dict(os.environ), echo=False)
    try:
        sup.start(
            ServiceSpec(
                "orphaner",
                [sys.executable, "-u", "-c", ORPHANING_SERVICE, str(children)],
                log_ready("ready"),
                ready_timeout_s=60,
            )
        )
        first = sup.running["orphaner"].proc.pid
        [orphan] = [int(pid) for pid in children.read_text().split()]
        assert os.getpgid(orphan) == first
        os.kill(first, signal.SIGKILL)
        sup.running["orphaner"].proc.wait(10)
        assert sup.poll() == ["orphaner"]
        assert not alive(orphan), f"the dead service's child {orphan} outlived it into the restart"
        second = sup.running["orphaner"].proc.pid
        assert second != first and alive(second)
        assert len(children.read_text().split()) == 2  # the new instance started its own child
    finally:
        sup.stop_all()
        for pid in [int(p) for p in children.read_text().split()] if children.exists() else []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
