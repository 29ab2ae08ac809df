"""``harnessrl serve gateway``: run the gateway on TCP (``settings.host:gateway_port``) and on its Unix socket.

The socket (``settings.resolved_gateway_socket``) is how sandboxed harnesses reach the gateway; it is made
world-writable because sandboxed processes run as another uid (``settings.sandbox_uid``) and the socket grants
nothing but the model API, which still needs a rollout key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import click
from aiohttp import web

from services.gateway.app import create_app
from services.gateway.splice import SPLICE_MODES
from shared.logging import configure_logging
from shared.settings import Settings, get_settings


async def run_gateway(settings: Settings, *, splice_mode: str, measure_drift: bool) -> None:
    app = create_app(settings, splice_mode=splice_mode, measure_drift=measure_drift)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    socket_path = settings.resolved_gateway_socket
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    await web.TCPSite(runner, settings.host, settings.gateway_port).start()
    await web.UnixSite(runner, str(socket_path)).start()
    os.chmod(socket_path, 0o666)
    click.echo(
        f"gateway listening on http://{settings.host}:{settings.gateway_port} and unix:{socket_path} "
        f"(mode {splice_mode}, inference {', '.join(settings.resolved_inference_urls)})",
        err=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()


@click.command("gateway")
@click.option(
    "--mode",
    "splice_mode",
    type=click.Choice(SPLICE_MODES),
    default="splice",
    show_default=True,
    help="splice: extend chains with the model's own sampled ids; retemplate: render every prompt from scratch.",
)
@click.option(
    "--measure-drift/--no-measure-drift",
    default=True,
    show_default=True,
    help="Record per call whether a from-scratch render differs from the spliced prompt (one extra render).",
)
def serve_gateway(splice_mode: str, measure_drift: bool) -> None:
    """Run the model-API gateway (OpenAI, Anthropic, Gemini protocols) in the foreground."""
    configure_logging("gateway")
    asyncio.run(run_gateway(get_settings(), splice_mode=splice_mode, measure_drift=measure_drift))
