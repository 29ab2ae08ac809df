"""``harnessrl worker grader``: a Celery worker consuming the ``grading`` queue."""

from __future__ import annotations

import click


@click.command("grader")
@click.option(
    "-c",
    "--concurrency",
    type=int,
    default=None,
    help="Gradings run at once [default: settings.grader_concurrency].",
)
@click.option("-n", "--hostname", default="grader@%h", show_default=True, help="Celery node name.")
@click.option("-l", "--loglevel", default="info", show_default=True)
def grader_worker(concurrency: int | None, hostname: str, loglevel: str) -> None:
    """Grade finished rollouts from the ``grading`` queue (needs bubblewrap unless HARNESSRL_ALLOW_UNSANDBOXED)."""
    from services.grader.tasks import app
    from shared.queues import GRADING_QUEUE, worker_argv
    from shared.settings import get_settings

    # More than one slot by default: a test that hangs until its time limit must not hold every other grading.
    concurrency = concurrency or get_settings().grader_concurrency
    app.worker_main(worker_argv(GRADING_QUEUE, concurrency, hostname, loglevel))
