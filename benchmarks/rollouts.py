"""``harnessrl bench rollouts``: what a rollout costs on this machine, with real vLLM serving the tiny model.

Setup (torn down afterwards): a scratch Postgres database (migrated) on the configured server, a temporary data
dir and local object store under /tmp (the sandbox uid must reach it), ``harnessrl serve inference
--no-updater`` (real vLLM, the tiny model) and ``harnessrl serve gateway`` as separate processes. Rollouts run
in this process through the same functions the Celery task calls (``claim`` + ``execute_attempt``).

Figures, measured side by side in one run:
- **sandbox start**: ``true`` run plainly, in the sandbox, and in the sandbox with the gateway forwarder (what
  every harness start pays: setpriv + bwrap + namespaces + the loopback-to-socket relay); medians in ms;
- **rollout phases** (reference harness, swe_mini ``textkit-1``): materialize, harness run, whole rollout;
- **rollouts per minute** at 1 and 2 rollouts in parallel. A random tiny model emits no tool call, so a
  rollout is one model call of up to ``--max-tokens`` tokens: these are pipeline figures, not agent ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click

from services.runner.rollout import Attempt, claim, execute_attempt
from shared.datasets import load_dataset
from shared.db import make_engine, session_factory, session_scope
from shared.harnesses import ReferenceOptions
from shared.ids import new_id
from shared.machine import describe_machine
from shared.models import Group, Rollout, Run
from shared.models import Task as TaskRow
from shared.objectstore import open_store
from shared.ports import free_port
from shared.rollout_records import read_meta
from shared.run_config import RunConfig
from shared.sandbox import Sandbox
from shared.scratch_db import scratch_database
from shared.settings import Settings, get_settings
from shared.tasks import Task

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTANCE_ID = "textkit-1"


def child_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ) | {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    for name, value in settings.model_dump(mode="json").items():
        if value is not None:
            env[f"HARNESSRL_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


@contextlib.contextmanager
def service(argv: list[str], env: dict[str, str], log: Path, ready: Callable[[], bool], timeout_s: float):
    """A ``harnessrl`` subcommand in its own session, ready once ``ready()``; stopped on exit."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", *argv], env=env, cwd=REPO_ROOT, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise click.ClickException(f"harnessrl {' '.join(argv)} did not come up:\n{tail}")
            time.sleep(0.5)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(10)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure_sandbox_start(
    sandbox: Sandbox, settings: Settings, workdir: Path, repeat: int
) -> dict[str, float]:
    workspace = workdir / "sandbox-start"
    workspace.mkdir()
    limits = sandbox.limits(60)
    port = free_port()
    plain = median_ms(lambda: subprocess.run(["true"], check=True), repeat)
    boxed = median_ms(lambda: sandbox.run(["true"], workspace, limits=limits), repeat)
    relayed = median_ms(
        lambda: sandbox.run(
            ["true"],
            workspace,
            limits=limits,
            gateway_socket=settings.resolved_gateway_socket,
            gateway_port=port,
        ),
        repeat,
    )
    return {"plain_ms": plain, "sandbox_ms": boxed, "sandbox_with_forwarder_ms": relayed}


def make_group(settings: Settings, task: Task, size: int, max_tokens: int) -> list[str]:
    config = RunConfig(
        model=settings.served_model_name,
        harness=ReferenceOptions(max_tokens=max_tokens, max_turns=4),
        group_size=size,
    )
    db = session_factory(make_engine(settings.database_url))
    with session_scope(db) as session:
        run = Run.create(new_id("run"), config)
        task_row = TaskRow(id=new_id("task"), dataset=new_id("bench"), instance_id=task.instance_id,
                           spec=task.model_dump(mode="json"))  # fmt: skip
        session.add_all([run, task_row])
        session.flush()
        group = Group(id=new_id("grp"), run_id=run.id, task_id=task_row.id, step=0, size=size)
        session.add(group)
        session.flush()
        rollouts = [
            Rollout(
                id=new_id("ro"),
                run_id=run.id,
                group_id=group.id,
                task_id=task_row.id,
                index_in_group=i,
                harness="reference",
            )  # fmt: skip
            for i in range(size)
        ]
        session.add_all(rollouts)
        return [r.id for r in rollouts]


def run_rollouts(
    settings: Settings, sandbox: Sandbox, task: Task, count: int, parallel: int, max_tokens: int
) -> dict[str, Any]:
    db = session_factory(make_engine(settings.database_url))
    store = open_store(settings)
    rollout_ids = make_group(settings, task, count, max_tokens)

    def one(rollout_id: str) -> float:
        started = time.perf_counter()
        attempt = claim(settings, db, store, rollout_id)
        assert isinstance(attempt, Attempt)
        execute_attempt(settings, db, store, sandbox, attempt)
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        durations = list(pool.map(one, rollout_ids))
    wall_s = time.perf_counter() - started
    with session_scope(db) as session:
        rows = [session.get(Rollout, rollout_id) for rollout_id in rollout_ids]
        reports = [last for row in rows if row is not None and (last := read_meta(row).last_attempt)]
        statuses = sorted({row.status for row in rows if row is not None})
        errors = sorted({row.error for row in rows if row is not None and row.error})
    return {
        "rollouts": count,
        "parallel": parallel,
        "statuses": statuses,
        "errors": errors[:3],
        "rollouts_per_minute": 60.0 * count / wall_s,
        "rollout_s_median": statistics.median(durations),
        "materialize_s_median": statistics.median(r.materialize_s for r in reports),
        "harness_s_median": statistics.median(r.harness_s for r in reports),
        "calls_per_rollout": statistics.mean(r.calls for r in reports),
    }


def measure(model_dir: Path, rollouts: int, repeat: int, max_tokens: int) -> dict[str, Any]:
    base = get_settings()
    task = next(t for t in load_dataset("swe_mini") if t.instance_id == INSTANCE_ID)
    with tempfile.TemporaryDirectory(prefix="harnessrl-bench-rollouts-", dir="/tmp") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)
        with scratch_database(base.database_url, "harnessrl_bench_rollouts") as database_url:
            settings = base.model_copy(
                update={
                    "database_url": database_url,
                    "data_dir": workdir,
                    "object_store_url": f"file://{workdir / 'objects'}",
                    "gateway_socket": workdir / "gateway.sock",
                    "gateway_port": free_port(),
                    "inference_port": free_port(),
                    "api_port": free_port(),
                    "inference_urls": [],
                    "model_dir": model_dir,
                    "max_model_len": 4096,
                }
            )
            env = child_env(settings)
            inference = ["serve", "inference", "--no-updater", "--model", str(model_dir)]
            vllm_ready = f"http://127.0.0.1:{settings.inference_port}/health"
            gateway_ready = f"http://127.0.0.1:{settings.gateway_port}/healthz"
            started = time.perf_counter()
            with (
                service(inference, env, workdir / "inference.log", lambda: http_ok(vllm_ready), 600),
                service(
                    ["serve", "gateway"], env, workdir / "gateway.log", lambda: http_ok(gateway_ready), 120
                ),
            ):
                services_s = time.perf_counter() - started
                sandbox = Sandbox(settings)
                start = measure_sandbox_start(sandbox, settings, workdir, repeat)
                runs = [
                    run_rollouts(settings, sandbox, task, rollouts, parallel, max_tokens)
                    for parallel in (1, 2)
                ]
    return {
        "machine": describe_machine(),
        "isolation": sandbox.isolation,
        "model": f"tiny ({model_dir.name}), real vLLM, max_tokens {max_tokens}",
        "services_start_s": services_s,
        "sandbox_start": start,
        "sandbox_start_overhead_ms": start["sandbox_ms"] - start["plain_ms"],
        "forwarder_overhead_ms": start["sandbox_with_forwarder_ms"] - start["sandbox_ms"],
        "runs": runs,
        "parallel_speedup": runs[1]["rollouts_per_minute"] / runs[0]["rollouts_per_minute"],
    }


def print_table(result: dict[str, Any]) -> None:
    start = result["sandbox_start"]
    click.echo(f"machine: {result['machine']}\nisolation: {result['isolation']}\nmodel: {result['model']}")
    click.echo(f"services (vLLM + gateway) ready in {result['services_start_s']:.1f} s\n")
    click.echo(f"{'sandbox start (true)':<34}{'median ms':>12}")
    for label, key in (("plain", "plain_ms"), ("sandbox", "sandbox_ms"), ("sandbox + forwarder", "sandbox_with_forwarder_ms")):  # fmt: skip
        click.echo(f"{label:<34}{start[key]:>12.1f}")
    click.echo(f"{'overhead: sandbox / forwarder':<34}{result['sandbox_start_overhead_ms']:>6.1f} / "
               f"{result['forwarder_overhead_ms']:.1f}\n")  # fmt: skip
    header = f"{'parallel':>8}{'rollouts/min':>14}{'rollout s':>11}{'materialize s':>15}{'harness s':>11}{'calls':>7}"
    click.echo(header)
    for run in result["runs"]:
        click.echo(
            f"{run['parallel']:>8}{run['rollouts_per_minute']:>14.1f}{run['rollout_s_median']:>11.2f}"
            f"{run['materialize_s_median']:>15.2f}{run['harness_s_median']:>11.2f}{run['calls_per_rollout']:>7.1f}"
        )
        if run["errors"]:
            click.echo(f"  statuses {run['statuses']}; errors: {run['errors']}")
    click.echo(f"\nparallel speedup (2 vs 1): {result['parallel_speedup']:.2f}x")


@click.command("rollouts")
@click.option(
    "--model",
    "model_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Model directory (default: the configured model dir; the tiny model is built there if missing).",
)
@click.option("--rollouts", default=8, show_default=True, help="Rollouts per parallelism level.")
@click.option("--repeat", default=10, show_default=True, help="Runs per sandbox-start figure (median).")
@click.option(
    "--max-tokens", default=128, show_default=True, help="Completion budget of the reference agent."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def bench_rollouts(
    model_dir: Path | None, rollouts: int, repeat: int, max_tokens: int, as_json: bool
) -> None:
    """Sandbox start overhead and rollouts per minute (reference harness, tiny model on real vLLM)."""
    model_dir = (model_dir or get_settings().resolved_model_dir).resolve()
    if not (model_dir / "config.json").is_file():
        click.echo(f"building the tiny model in {model_dir}", err=True)
        subprocess.run([sys.executable, "-m", "services.cli.main", "model", "init-tiny", str(model_dir)],
                       cwd=REPO_ROOT, check=True)  # fmt: skip
    if shutil.which("bwrap") is None and not get_settings().allow_unsandboxed:
        raise click.ClickException("bubblewrap is not installed; run scripts/install-system.sh")
    result = measure(model_dir, rollouts, repeat, max_tokens)
    if as_json:
        click.echo(json.dumps(result))
    else:
        print_table(result)
