"""``harnessrl serve api``: run the REST API (and its step scheduler) in the foreground.

A bind beyond loopback with the shipped or a short API token is refused before anything starts
(``shared.settings.check_api_exposure``): one line, exit 2.
"""

from __future__ import annotations

import click
from aiohttp import web

from services.api.app import create_app
from shared.logging import configure_logging
from shared.settings import check_api_exposure, get_settings


@click.command("api")
@click.option("--host", default=None, help="Interface to bind (default: settings host).")
@click.option("--port", type=int, default=None, help="Port (default: settings api_port).")
@click.option("--no-scheduler", is_flag=True, help="Do not schedule steps here (another api process does).")
@click.option("--log-level", default="INFO", show_default=True)
def serve_api(host: str | None, port: int | None, no_scheduler: bool, log_level: str) -> None:
    """The REST API: runs, tasks, status, trajectories, plots, /openapi.json, /metrics."""
    settings = get_settings()
    bind_host = host or settings.host
    check_api_exposure(bind_host, settings.api_token)
    configure_logging("api", log_level)
    app = create_app(settings, scheduler=not no_scheduler)
    web.run_app(app, host=bind_host, port=port or settings.api_port, print=None, access_log=None)
