"""``harnessrl sql ["QUERY"]``: query the harnessrl database; with no query, an interactive ``psql``.

A QUERY runs read-only, whatever it says: the connection starts with ``default_transaction_read_only=on``, the
query runs inside a ``BEGIN READ ONLY`` transaction that is always rolled back, and it is sent as one prepared
statement, which Postgres parses as exactly one statement: ``COMMIT; DROP TABLE runs`` or ``SET TRANSACTION READ
WRITE; ...`` is refused whole instead of ending the read-only transaction, and a lone ``COMMIT`` or
``SET default_transaction_read_only = off`` changes nothing the query can use. What it does not stop: a superuser's
read-only statements that act outside the tables (``COPY ... TO PROGRAM``, ``pg_terminate_backend``); give people
who only query a database URL without superuser rights.

``psql`` opens with ``default_transaction_read_only=on`` too (``PGOPTIONS``): a typo cannot write, but a person
at the prompt can turn it off. The password travels in the environment (``PGPASSWORD``), never in ``psql``'s
argv, which every user of the machine can read. The cookbook of useful queries is ``docs/sql-cookbook.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import click
import psycopg
from rich.console import Console
from rich.table import Table
from sqlalchemy import URL, make_url

from shared.settings import load_settings

READ_ONLY_OPTIONS = "-c default_transaction_read_only=on"


def libpq_url(database_url: str) -> str:
    """The SQLAlchemy URL as a libpq URI psql understands (no ``+psycopg`` driver suffix)."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def psql_invocation(database_url: str, environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``psql``'s argv tail (the URI without its password) and environment (the password, read-only options)."""
    url = make_url(database_url)
    password = url.password or url.query.get("password")
    query = {key: value for key, value in url.query.items() if key != "password"}
    bare = URL.create(
        "postgresql", url.username, None, url.host, url.port, url.database, query
    ).render_as_string(hide_password=False)
    env = dict(environ)
    if password:
        env["PGPASSWORD"] = str(password)
    env["PGOPTIONS"] = f"{environ.get('PGOPTIONS', '')} {READ_ONLY_OPTIONS}".strip()
    return [bare], env


def run_query(database_url: str, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``query`` as one statement in a read-only transaction, rolled back; its column names and rows."""
    with psycopg.connect(
        libpq_url(database_url), options=READ_ONLY_OPTIONS, connect_timeout=10
    ) as connection:
        connection.read_only = True  # BEGIN READ ONLY before the query
        try:
            with connection.cursor() as cursor:
                # prepare=True: the extended protocol, one statement or a refusal (the simple protocol would run
                # "COMMIT; <anything>" as two).
                cursor.execute(query.encode(), prepare=True)
                if cursor.description is None:
                    return [], []
                return [column.name for column in cursor.description], [
                    tuple(row) for row in cursor.fetchall()
                ]
        finally:
            connection.rollback()


@click.command()
@click.argument("query", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
def sql(query: str | None, as_json: bool) -> None:
    """Run QUERY (one statement) read-only and print the rows; without QUERY open psql on the database."""
    database_url = load_settings().database_url
    if query is None:
        psql = shutil.which("psql")
        if psql is None:
            raise click.ClickException('psql is not installed; pass a query: harnessrl sql "SELECT ..."')
        args, env = psql_invocation(database_url, dict(os.environ))
        os.execve(psql, [psql, *args], env)
    try:
        columns, rows = run_query(database_url, query)
    except psycopg.Error as exc:
        message = str(exc).strip()
        if "multiple commands" in message:
            message += " (harnessrl sql runs one statement at a time)"
        click.echo(f"harnessrl sql: {message}", err=True)
        sys.exit(1)
    if as_json:
        for row in rows:
            click.echo(json.dumps(dict(zip(columns, row, strict=True)), default=str))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    Console().print(table)
    click.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
