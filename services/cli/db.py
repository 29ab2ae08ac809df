"""``harnessrl db``: schema migrations against the configured database."""

from __future__ import annotations

import click

from shared import migrate
from shared.settings import get_settings


@click.group()
def db() -> None:
    """Database schema (Alembic)."""


@db.command()
@click.option("--revision", default="head", show_default=True)
def upgrade(revision: str) -> None:
    """Create or update the schema and views."""
    url = get_settings().database_url
    migrate.upgrade(url, revision)
    click.echo(f"database at revision {revision}")


@db.command()
@click.option("--revision", default="base", show_default=True)
def downgrade(revision: str) -> None:
    """Roll the schema back (to base: drop everything)."""
    migrate.downgrade(get_settings().database_url, revision)
    click.echo(f"database at revision {revision}")


@db.command()
def check() -> None:
    """Fail if the models drift from the migrations."""
    migrate.check(get_settings().database_url)
    click.echo("no drift")
