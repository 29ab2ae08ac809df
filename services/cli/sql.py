"""``harnessrl sql ["QUERY"]``: query the harnessrl database; with no query, an interactive ``psql``.

Queries run in a read-only transaction, so a typo in an ad-hoc query cannot change training data. The
cookbook of useful queries is ``docs/sql-cookbook.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError

from shared.db import make_engine
from shared.settings import load_settings


def libpq_url(database_url: str) -> str:
    """The SQLAlchemy URL as a libpq URI psql understands (no ``+psycopg`` driver suffix)."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def run_query(database_url: str, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            result = connection.execute(text(query))
            if not result.returns_rows:
                return [], []
            return list(result.keys()), [tuple(row) for row in result]
    finally:
        engine.dispose()


@click.command()
@click.argument("query", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
def sql(query: str | None, as_json: bool) -> None:
    """Run QUERY read-only and print the rows; without QUERY open psql on the database."""
    database_url = load_settings().database_url
    if query is None:
        psql = shutil.which("psql")
        if psql is None:
            raise click.ClickException('psql is not installed; pass a query: harnessrl sql "SELECT ..."')
        os.execv(psql, [psql, libpq_url(database_url)])
    try:
        columns, rows = run_query(database_url, query)
    except DBAPIError as exc:
        message = str(exc.orig).strip() if exc.orig is not None else str(exc)
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
