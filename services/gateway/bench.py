"""``harnessrl bench gateway``: what the gateway adds on top of the inference server, measured side by side.

Setup (all on this machine, torn down afterwards): a scratch Postgres database (migrated), a temporary local
object store, the scripted policy server (``tests/fixtures/scripted_policy.py``) as the inference upstream — it
speaks vLLM's token-id protocol and has no context limit, so 20k and 60k-token prompts are possible where the
tiny vLLM model stops at 4k — and the gateway itself as a separate process (``harnessrl serve gateway``, default
splice mode with the drift check on). The client runs in this process.

Figures:
- **added latency** at 2k / 20k / 60k-token prompts: per episode, call 1 (a new chain: full render) and call 2
  (extends the chain: suffix render + splice) through the gateway (OpenAI chat, non-streaming), then the same
  prompt ids sent straight to the upstream; p50/p99 of gateway − direct, per call kind;
- **TTFB** of a streamed call (gateway vs upstream directly, 2k prompt, 10 ms per token upstream);
- **requests/s at concurrency 32** (2k prompts, two-call episodes), through the gateway and direct.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import click
import numpy as np

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message
from shared.machine import describe_machine
from shared.scratch_db import scratch_database

REPO_ROOT = Path(__file__).resolve().parents[2]
FILLER = (
    "def handler(request, retries=3):\n    # keep the last value seen\n    return request.value + retries\n"
)
TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
]  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(Exception):
            urllib.request.urlopen(url, timeout=1)
            return
        time.sleep(0.2)
    raise click.ClickException(f"{url} did not come up in {timeout_s}s")


def make_rollouts(database_url: str, count: int) -> list[tuple[str, str]]:
    from shared.db import make_engine, session_factory, session_scope
    from shared.ids import new_id, new_rollout_key
    from shared.models import Rollout, Run, Task

    engine = make_engine(database_url)
    run_id, task_id = new_id("run"), new_id("task")
    out = [(new_id("ro"), new_rollout_key()) for _ in range(count)]
    with session_scope(session_factory(engine)) as session:
        session.add(Run(id=run_id, model="policy", harness="bench", group_size=1))
        session.add(Task(id=task_id, dataset="bench", instance_id=task_id, spec={}))
        session.flush()
        for rollout_id, key in out:
            session.add(
                Rollout(
                    id=rollout_id,
                    run_id=run_id,
                    task_id=task_id,
                    harness="bench",
                    rollout_key=key,
                    status="running",
                )
            )
    engine.dispose()
    return out


def prompt_of_size(chat_format: ChatFormat, tokens: int) -> str:
    """A user message whose first-call prompt renders to about ``tokens`` tokens."""
    per_copy = len(chat_format.encode(FILLER))
    copies = max(1, tokens // per_copy)
    text = FILLER * copies
    base = len(chat_format.render_prompt(Conversation("openai_chat", [Message("user", text)])))
    return FILLER * max(1, copies - (base - tokens) // per_copy)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


class Bench:
    def __init__(self, gateway_url: str, upstream_url: str, session: aiohttp.ClientSession) -> None:
        self.gateway_url, self.upstream_url, self.session = gateway_url, upstream_url, session

    async def gateway_episode(self, key: str, user_text: str) -> tuple[float, float]:
        """Two calls of one rollout: a new chain, then a spliced extension. Returns their latencies (s)."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "bench"},
            {"role": "user", "content": user_text},
        ]
        headers = {"Authorization": f"Bearer {key}"}
        latencies = []
        for _ in range(2):
            body = {"model": "policy", "messages": messages, "tools": TOOLS, "max_tokens": 64}
            start = time.perf_counter()
            async with self.session.post(
                f"{self.gateway_url}/v1/chat/completions", json=body, headers=headers
            ) as r:
                payload = await r.json()
                if r.status != 200:
                    raise click.ClickException(f"gateway answered {r.status}: {payload}")
            latencies.append(time.perf_counter() - start)
            message = payload["choices"][0]["message"]
            messages.append(message)
            for call in message.get("tool_calls") or []:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
        return latencies[0], latencies[1]

    async def direct(self, prompt_ids: list[int], stream: bool = False) -> tuple[float, float]:
        """One upstream request with these ids; returns (time to first byte, total) in seconds."""
        body = {
            "model": "policy",
            "token_ids": prompt_ids,
            "sampling_params": {"max_tokens": 64, "logprobs": 1, "skip_special_tokens": True},
            "output_mode": "text",
            "stream": stream,
        }
        start = time.perf_counter()
        first = None
        async with self.session.post(f"{self.upstream_url}/inference/v1/generate", json=body) as r:
            async for _ in r.content.iter_any():
                first = first or time.perf_counter()
        end = time.perf_counter()
        return (first or end) - start, end - start

    async def gateway_ttfb(self, key: str, user_text: str) -> tuple[float, float]:
        body = {
            "model": "policy",
            "messages": [{"role": "system", "content": "bench"}, {"role": "user", "content": user_text}],
            "tools": TOOLS,
            "stream": True,
            "max_tokens": 64,
        }
        start = time.perf_counter()
        first = None
        async with self.session.post(
            f"{self.gateway_url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as r:
            async for _ in r.content.iter_any():
                first = first or time.perf_counter()
        end = time.perf_counter()
        return (first or end) - start, end - start


def chain_prompts(
    database_url: str,
    store_dir: Path,
    rollout_ids: list[str],
    breakdown: dict[str, list[float]] | None = None,
) -> dict[str, list[list[int]]]:
    """The exact prompt ids each recorded call sent upstream, from the stored token segments; ``breakdown``
    collects the gateway's own latency fields of those calls."""
    from sqlalchemy import select

    from shared.db import make_engine, session_factory, session_scope
    from shared.models import Call
    from shared.objectstore import LocalObjectStore
    from shared.trajectory import call_prompt_length, load_chain_tokens

    store = LocalObjectStore(store_dir)
    engine = make_engine(database_url)
    out: dict[str, list[list[int]]] = {}
    with session_scope(session_factory(engine)) as session:
        for rollout_id in rollout_ids:
            calls = list(
                session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.position))
            )
            ids, _, _, _ = load_chain_tokens(store, calls)
            out[rollout_id] = [ids[: call_prompt_length(store, calls, c.position)].tolist() for c in calls]
            if breakdown is not None:
                for call in calls:
                    kind = "new_chain" if call.position == 0 else "spliced"
                    for field in ("queue_ms", "inference_ms", "total_ms"):
                        breakdown.setdefault(f"{kind}_{field}", []).append(getattr(call, field))
    engine.dispose()
    return out


async def run_bench(gateway_url: str, upstream_url: str, database_url: str, store_dir: Path, chat_format: ChatFormat, sizes: list[int], episodes: int, concurrency: int) -> dict[str, Any]:  # fmt: skip
    results: dict[str, Any] = {"latency": {}, "machine": describe_machine()}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=600)
    ) as session:
        bench = Bench(gateway_url, upstream_url, session)
        warm = make_rollouts(database_url, 2)
        await bench.gateway_episode(warm[0][1], "warm up")
        for size in sizes:
            text = await asyncio.to_thread(prompt_of_size, chat_format, size)
            rollouts = make_rollouts(database_url, episodes)
            via_gateway: list[tuple[float, float]] = []
            for _, key in rollouts:
                via_gateway.append(await bench.gateway_episode(key, text))
            breakdown: dict[str, list[float]] = {}
            prompts = await asyncio.to_thread(
                chain_prompts, database_url, store_dir, [r for r, _ in rollouts], breakdown
            )
            direct: list[tuple[float, float]] = []
            for rollout_id, _ in rollouts:
                first, second = prompts[rollout_id]
                direct.append(((await bench.direct(first))[1], (await bench.direct(second))[1]))
            row: dict[str, Any] = {"prompt_tokens": len(prompts[rollouts[0][0]][0])}
            for index, kind in enumerate(("new_chain", "spliced")):
                added = [(g[index] - d[index]) * 1000 for g, d in zip(via_gateway, direct, strict=True)]
                row[kind] = {
                    "gateway_p50_ms": percentile([g[index] * 1000 for g in via_gateway], 50),
                    "direct_p50_ms": percentile([d[index] * 1000 for d in direct], 50),
                    "added_p50_ms": percentile(added, 50),
                    "added_p99_ms": percentile(added, 99),
                    # the gateway's own record: arrival -> upstream request, upstream, arrival -> recorded
                    "recorded_queue_p50_ms": percentile(breakdown[f"{kind}_queue_ms"], 50),
                    "recorded_inference_p50_ms": percentile(breakdown[f"{kind}_inference_ms"], 50),
                    "recorded_total_p50_ms": percentile(breakdown[f"{kind}_total_ms"], 50),
                }
            results["latency"][f"{size // 1000}k"] = row

        # time to first byte, streamed, with a visible per-token upstream delay
        await session.post(f"{upstream_url}/script", json={"token_delay_s": 0.01})
        text = await asyncio.to_thread(prompt_of_size, chat_format, 2000)
        keys = make_rollouts(database_url, episodes)
        gw = [await bench.gateway_ttfb(key, text) for _, key in keys]
        streamed = await asyncio.to_thread(chain_prompts, database_url, store_dir, [r for r, _ in keys])
        ids = streamed[keys[0][0]][0]  # the exact prompt the gateway sent upstream
        up = [await bench.direct(ids, stream=True) for _ in keys]
        results["ttfb"] = {
            "gateway_ttfb_p50_ms": percentile([g[0] * 1000 for g in gw], 50),
            "gateway_total_p50_ms": percentile([g[1] * 1000 for g in gw], 50),
            "direct_ttfb_p50_ms": percentile([u[0] * 1000 for u in up], 50),
            "direct_total_p50_ms": percentile([u[1] * 1000 for u in up], 50),
        }
        await session.post(f"{upstream_url}/script", json={"token_delay_s": 0.0})

        # throughput at concurrency 32: two-call episodes, 2k prompts
        keys = make_rollouts(database_url, concurrency * 4)
        start = time.perf_counter()
        queue = list(keys)

        async def worker() -> int:
            done = 0
            while queue:
                _, key = queue.pop()
                await bench.gateway_episode(key, text)
                done += 2
            return done

        requests = sum(await asyncio.gather(*(worker() for _ in range(concurrency))))
        gateway_rps = requests / (time.perf_counter() - start)
        jobs = [ids] * (concurrency * 8)
        start = time.perf_counter()

        async def direct_worker() -> int:
            done = 0
            while jobs:
                await bench.direct(jobs.pop())
                done += 1
            return done

        direct_requests = sum(await asyncio.gather(*(direct_worker() for _ in range(concurrency))))
        results["throughput"] = {
            "concurrency": concurrency,
            "gateway_requests_per_s": gateway_rps,
            "direct_requests_per_s": direct_requests / (time.perf_counter() - start),
        }
    return results


def print_table(results: dict[str, Any]) -> None:
    click.echo(
        f"gateway benchmark — upstream: scripted policy server; drift check {'on' if results['measure_drift'] else 'off'}; "
        f"machine: {results['machine']}"
    )
    click.echo(
        f"{'context':>8} {'call':>10} {'prompt':>7} {'gateway p50':>12} {'direct p50':>11} {'added p50':>10} "
        f"{'added p99':>10} {'rec. queue':>11} {'rec. total':>11}"
    )
    for size, row in results["latency"].items():
        for kind in ("new_chain", "spliced"):
            r = row[kind]
            click.echo(
                f"{size:>8} {kind:>10} {row['prompt_tokens']:>7} {r['gateway_p50_ms']:>10.1f}ms "
                f"{r['direct_p50_ms']:>9.1f}ms {r['added_p50_ms']:>8.1f}ms {r['added_p99_ms']:>8.1f}ms "
                f"{r['recorded_queue_p50_ms']:>9.1f}ms {r['recorded_total_p50_ms']:>9.1f}ms"
            )
    t = results["ttfb"]
    click.echo(
        f"streaming (2k, 10 ms/token upstream): gateway TTFB p50 {t['gateway_ttfb_p50_ms']:.1f} ms of "
        f"{t['gateway_total_p50_ms']:.1f} ms total; direct TTFB {t['direct_ttfb_p50_ms']:.1f} ms of {t['direct_total_p50_ms']:.1f} ms"
    )
    tp = results["throughput"]
    click.echo(
        f"concurrency {tp['concurrency']}: gateway {tp['gateway_requests_per_s']:.1f} req/s, "
        f"direct {tp['direct_requests_per_s']:.1f} req/s"
    )


@click.command("gateway")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--sizes", default="2000,20000,60000", show_default=True, help="Prompt sizes in tokens.")
@click.option("--episodes", default=20, show_default=True, help="Two-call episodes per prompt size.")
@click.option("--concurrency", default=32, show_default=True)
@click.option(
    "--measure-drift/--no-measure-drift",
    default=True,
    show_default=True,
    help="Run the gateway with the per-call retemplate drift check (its default) or without.",
)
def bench_gateway(as_json: bool, sizes: str, episodes: int, concurrency: int, measure_drift: bool) -> None:
    """Added latency, TTFB and throughput of the gateway against its upstream called directly."""
    from shared.settings import get_settings

    settings = get_settings()
    model_dir = settings.resolved_model_dir
    size_list = [int(s) for s in sizes.split(",") if s.strip()]
    with (
        tempfile.TemporaryDirectory(prefix="harnessrl-bench-gw-") as tmp,
        scratch_database(settings.database_url) as db_url,
    ):
        tmp_path = Path(tmp)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
        if not (model_dir / "tokenizer.json").exists():
            model_dir = tmp_path / "model"
            subprocess.run([sys.executable, "-m", "services.cli.main", "model", "init-tiny", str(model_dir)], check=True, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
        upstream_port, gateway_port = _free_port(), _free_port()
        upstream_url, gateway_url = f"http://127.0.0.1:{upstream_port}", f"http://127.0.0.1:{gateway_port}"
        gateway_env = {
            **env,
            "HARNESSRL_DATABASE_URL": db_url,
            "HARNESSRL_OBJECT_STORE_URL": f"file://{tmp_path / 'objects'}",
            "HARNESSRL_DATA_DIR": str(tmp_path),
            "HARNESSRL_MODEL_DIR": str(model_dir),
            "HARNESSRL_GATEWAY_PORT": str(gateway_port),
            "HARNESSRL_INFERENCE_URLS": json.dumps([upstream_url]),
            "HARNESSRL_MAX_MODEL_LEN": str(max(size_list) + 10_000),
            "HARNESSRL_REDIS_URL": settings.redis_url,
        }
        logs = open(tmp_path / "processes.log", "wb")  # noqa: SIM115 - closed below
        upstream = subprocess.Popen([sys.executable, "-m", "tests.fixtures.scripted_policy", "--model-dir", str(model_dir), "--port", str(upstream_port)], env=env, cwd=REPO_ROOT, stdout=logs, stderr=subprocess.STDOUT)  # fmt: skip
        serve = [sys.executable, "-m", "services.cli.main", "serve", "gateway"]
        serve += [] if measure_drift else ["--no-measure-drift"]
        gateway = subprocess.Popen(
            serve, env=gateway_env, cwd=REPO_ROOT, stdout=logs, stderr=subprocess.STDOUT
        )
        try:
            _wait_http(upstream_url + "/health", upstream)
            _wait_http(gateway_url + "/healthz", gateway)
            chat_format = ChatFormat.load(model_dir)
            results = asyncio.run(
                run_bench(
                    gateway_url,
                    upstream_url,
                    db_url,
                    tmp_path / "objects",
                    chat_format,
                    size_list,
                    episodes,
                    concurrency,
                )
            )
        finally:
            for proc in (gateway, upstream):
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(15)
                if proc.poll() is None:
                    proc.kill()
            logs.close()
    results["upstream"] = "scripted policy server (tests/fixtures/scripted_policy.py), ~40-token replies"
    results["measure_drift"] = measure_drift
    if as_json:
        click.echo(json.dumps(results))
    else:
        print_table(results)
