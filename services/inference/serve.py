"""``harnessrl serve inference``: run vLLM for the policy and its weight updater in the foreground.

Starts vLLM (``launch.py``) logging to ``<data_dir>/logs/inference-vllm.log``, waits for ``/health``, then runs
the updater (``updater.py``) until SIGTERM/SIGINT, which stops the updater and then vLLM's whole process group.
If vLLM dies on its own the command exits with status 1 so a supervisor restarts it; the updater's catch-up then
serves the current policy version again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path

import click


def served_context_length(model_dir: Path, wanted: int) -> int:
    """``wanted``, capped at what the model's positions allow (vLLM refuses a longer ``--max-model-len``)."""
    config = json.loads((model_dir / "config.json").read_text())
    return min(wanted, int(config.get("max_position_embeddings", wanted)))


async def _wait_exit(proc) -> None:  # type: ignore[no-untyped-def]
    while proc.poll() is None:
        await asyncio.sleep(0.5)


async def _supervise(proc, updater, stop: asyncio.Event) -> bool:  # type: ignore[no-untyped-def]
    """Run until a signal sets ``stop`` or vLLM exits; True if vLLM exited on its own. An updater error
    (database or Redis unreachable) propagates."""
    watchers = [asyncio.create_task(stop.wait()), asyncio.create_task(_wait_exit(proc))]
    updater_task = asyncio.create_task(updater.run(stop)) if updater is not None else None
    waiting = [*watchers, *([updater_task] if updater_task else [])]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    for task in watchers:
        task.cancel()
    if updater_task is not None:
        await updater_task  # returns once it sees ``stop``; re-raises its error
    return proc.poll() is not None


@click.command("inference")
@click.option(
    "--model",
    "model_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Model directory (default: the configured model dir).",
)
@click.option("--port", type=int, help="Port vLLM listens on (default: settings inference_port).")
@click.option("--no-updater", is_flag=True, help="Serve only; do not follow published weights.")
@click.option("--start-timeout", default=300.0, show_default=True, help="Seconds to wait for vLLM's health.")
def serve_inference(model_dir: Path | None, port: int | None, no_updater: bool, start_timeout: float) -> None:
    """Serve the policy with vLLM and hot-swap each published version."""
    from services.inference.launch import VllmLaunch, VllmStartError, start_vllm, stop_vllm
    from shared.settings import get_settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s inference %(levelname)s %(message)s")
    settings = get_settings()
    model_dir = (model_dir or settings.resolved_model_dir).resolve()
    if not (model_dir / "config.json").is_file():
        raise click.BadParameter(f"{model_dir} has no config.json (build one: harnessrl model init-tiny)")
    launch = VllmLaunch(
        model_dir=model_dir,
        port=port or settings.inference_port,
        host=settings.host,
        served_model_name=settings.served_model_name,
        max_model_len=served_context_length(model_dir, settings.max_model_len),
        cache_dir=settings.data_dir / "cache" / "vllm",
        max_lora_rank=settings.inference_max_lora_rank,
    )
    log_path = settings.data_dir / "logs" / "inference-vllm.log"
    if not no_updater:
        # Before vLLM runs: a (re)started engine holds the base weights, not the policy Redis may still name, so
        # the pool is not ready (gateway and runner wait) until the updater's catch-up serves the right one.
        from shared.events import connect
        from shared.incidents import note_boot
        from shared.pool import mark_starting

        r = connect(settings.redis_url)
        try:
            mark_starting(r, served_by=launch.base_url)
            note_boot(r, "inference")
        finally:
            r.close()
    click.echo(f"starting vLLM on {launch.base_url} (model {model_dir}, log {log_path})")
    try:
        proc = start_vllm(launch, log_path, timeout_s=start_timeout)
    except VllmStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"vLLM ready on {launch.base_url}")

    updater = None
    if not no_updater:
        from services.inference.updater import Updater
        from shared.db import make_engine, session_factory
        from shared.objectstore import open_store

        updater = Updater(
            launch.base_url,
            model_dir,
            open_store(settings),
            session_factory(make_engine(settings.database_url)),
            settings.redis_url,
            settings.data_dir / "inference",
            exclusive=settings.pool_exclusive,
        )

    async def main() -> bool:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await _supervise(proc, updater, stop)

    try:
        vllm_died = asyncio.run(main())
    except Exception as exc:
        raise click.ClickException(f"weight updater failed: {exc}") from exc
    finally:
        stop_vllm(proc)
    if vllm_died:
        raise click.ClickException(f"vLLM exited on its own; see {log_path}")
    click.echo("inference stopped")
