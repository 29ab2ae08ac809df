"""``harnessrl worker runner``: a Celery worker consuming the ``rollouts`` queue."""

from __future__ import annotations

import click


@click.command("runner")
@click.option("-c", "--concurrency", type=int, default=1, show_default=True, help="Rollouts run at once.")
@click.option("-n", "--hostname", default="runner@%h", show_default=True, help="Celery node name.")
@click.option("-l", "--loglevel", default="info", show_default=True)
def runner_worker(concurrency: int, hostname: str, loglevel: str) -> None:
    """Run harness rollouts from the ``rollouts`` queue (needs bubblewrap unless HARNESSRL_ALLOW_UNSANDBOXED)."""
    from services.runner.tasks import app
    from shared.queues import ROLLOUTS_QUEUE, worker_argv

    app.worker_main(worker_argv(ROLLOUTS_QUEUE, concurrency, hostname, loglevel))
