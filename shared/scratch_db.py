"""A throwaway database on the configured Postgres server, migrated to head and dropped afterwards.

Benchmarks use it so their rows never mix with a real run's (``harnessrl bench gateway``, ``bench rollouts``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import psycopg
from sqlalchemy import make_url

from shared import migrate


def admin_url(database_url: str) -> str:
    """The same server's ``postgres`` database, as a plain psycopg URL."""
    url = make_url(database_url).set(drivername="postgresql", database="postgres")
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def scratch_database(database_url: str, prefix: str = "harnessrl_bench") -> Iterator[str]:
    """Yield the URL of a fresh migrated database named ``<prefix>_<pid>``; drop it on exit."""
    name = f"{prefix}_{os.getpid()}"
    admin = admin_url(database_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
