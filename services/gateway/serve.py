"""``harnessrl serve gateway [--workers N]``: the gateway on TCP (``settings.host:gateway_port``) and on its Unix socket,
served by N worker processes.

A small supervisor binds both listening sockets once and starts N workers (``harnessrl serve gateway
--worker-fds ...``) that inherit them and accept on both: the kernel hands each connection to one worker, with no
rollout-sticky routing — chain tips live in Redis, so any worker can serve any call (``tips.py``). A worker that
dies is started again; SIGTERM/SIGINT stop every worker (each finishes its replies and drains its records first),
then the supervisor. ``--workers`` defaults to ``settings.gateway_workers`` (from the core count), so
``harnessrl up`` and the compose service get a sensible number without configuration.

The socket (``settings.resolved_gateway_socket``) is how sandboxed harnesses reach the gateway; it is made
world-writable because sandboxed processes run as another uid (``settings.sandbox_uid``) and the socket grants
nothing but the model API, which still needs a rollout key.

Workers run on uvloop where it is installed (cheaper request handling than the default loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
from aiohttp import web

from services.gateway.app import create_app
from services.gateway.splice import SPLICE_MODES
from shared.logging import configure_logging
from shared.settings import Settings, get_settings

RESTART_BACKOFF_S = (0.2, 1.0, 5.0)
STOP_GRACE_S = 40.0


async def run_gateway(
    settings: Settings, *, splice_mode: str, measure_drift: bool, sockets: list[socket.socket]
) -> None:
    """One worker: the gateway app on the supervisor's listening sockets until SIGTERM/SIGINT."""
    app = create_app(settings, splice_mode=splice_mode, measure_drift=measure_drift)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for sock in sockets:
        await web.SockSite(runner, sock).start()
    settle_heap()
    click.echo(f"gateway worker {os.getpid()} serving ({gc.get_freeze_count()} objects frozen)", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


GC_THRESHOLDS = (20_000, 10, 10)
"""The collector's thresholds in a serving worker. Python's default young threshold (700 net allocations) is crossed
over and over by the transient peaks of concurrent calls (parsed bodies, id lists): ~400 young collections of ~1 ms
each in 4,000 calls at c=32, and 2 % of a worker's CPU. At 20,000 the peaks stay under it (2 collections in the same
calls), and the net growth of a serving worker, cyclic garbage included, reaches it now and then."""


def settle_heap() -> None:
    """Once a worker has loaded everything it serves with: collect, then freeze what is alive (the tokenizer,
    transformers and the torch it imports: ~460k objects, a 250 ms full collection that stalled every call in
    flight, 3 times in 4,000 calls) so that no collection walks it again, and raise the young threshold
    (``GC_THRESHOLDS``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _run(coroutine: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)  # type: ignore[arg-type]
    else:
        uvloop.run(coroutine)  # type: ignore[arg-type]


def bind_sockets(settings: Settings) -> list[socket.socket]:
    """The TCP and Unix listening sockets every worker accepts on (inheritable)."""
    tcp = socket.create_server((settings.host, settings.gateway_port), backlog=1024)
    path = settings.resolved_gateway_socket
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    os.chmod(path, 0o666)
    unix.listen(1024)
    for sock in (tcp, unix):
        sock.setblocking(False)
        sock.set_inheritable(True)
    return [tcp, unix]


def _die_with_parent() -> None:
    """In a worker before exec: SIGTERM when the supervisor dies (no orphaned workers holding the sockets)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def supervise(settings: Settings, workers: int, splice_mode: str, measure_drift: bool) -> int:
    """Bind, start ``workers`` worker processes, restart any that dies, stop them all on SIGTERM/SIGINT."""
    sockets = bind_sockets(settings)
    fds = [s.fileno() for s in sockets]
    metrics_dir = Path(settings.data_dir) / "run" / f"gateway-metrics-{os.getpid()}"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    # Every worker's metrics land in one directory; any worker's /metrics reports the sum (shared/metrics.py).
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    argv = [sys.executable, "-m", "services.cli.main", "serve", "gateway", "--mode", splice_mode]
    argv += ["--measure-drift" if measure_drift else "--no-measure-drift"]
    argv += ["--worker-fds", ",".join(map(str, fds))]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, pass_fds=fds, env=env, preexec_fn=_die_with_parent)

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    procs = [start() for _ in range(workers)]
    crashes = [0] * workers
    started_at = [time.monotonic()] * workers
    click.echo(
        f"gateway listening on http://{settings.host}:{settings.gateway_port} and "
        f"unix:{settings.resolved_gateway_socket} with {workers} worker(s) "
        f"{[p.pid for p in procs]} (mode {splice_mode}, inference {', '.join(settings.resolved_inference_urls)})",
        err=True,
    )
    try:
        while not stopping:
            time.sleep(0.1)
            for index, proc in enumerate(procs):
                if proc.poll() is None or stopping:
                    continue
                crashes[index] = crashes[index] + 1 if time.monotonic() - started_at[index] < 10 else 1
                wait_s = RESTART_BACKOFF_S[min(crashes[index], len(RESTART_BACKOFF_S)) - 1]
                click.echo(
                    f"gateway worker {proc.pid} exited with {proc.returncode}; starting another in {wait_s} s",
                    err=True,
                )
                time.sleep(wait_s)
                procs[index] = start()
                started_at[index] = time.monotonic()
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for sock in sockets:
            sock.close()
        with contextlib.suppress(FileNotFoundError):
            settings.resolved_gateway_socket.unlink()
        shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


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
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Gateway processes sharing the listening sockets [default: settings.gateway_workers, from the core count].",
)
@click.option("--worker-fds", hidden=True, default=None, help="(internal) listening sockets of a worker.")
def serve_gateway(splice_mode: str, measure_drift: bool, workers: int | None, worker_fds: str | None) -> None:
    """Run the model-API gateway (OpenAI, Anthropic, Gemini protocols) in the foreground."""
    configure_logging("gateway")
    settings = get_settings()
    if worker_fds:
        sockets = [socket.socket(fileno=int(fd)) for fd in worker_fds.split(",")]
        _run(run_gateway(settings, splice_mode=splice_mode, measure_drift=measure_drift, sockets=sockets))
        return
    sys.exit(supervise(settings, workers or settings.gateway_workers, splice_mode, measure_drift))
