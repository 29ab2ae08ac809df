"""``harnessrl bench gateway [--workers N]``: what the gateway adds on top of the inference server, side by side in
one run, for 1 gateway process and for N.

Setup (all on this machine, torn down afterwards): a scratch Postgres database (migrated), a temporary local object
store, the scripted policy server (``tests/fixtures/scripted_policy.py``) as the inference upstream — it speaks
vLLM's token-id protocol and has no context limit, so 20k and 60k-token prompts are possible where the tiny vLLM
model stops at 4k — and the gateway itself as its own processes (``harnessrl serve gateway --workers W``, default
splice mode, drift check on). The client runs in this process. Rollout keys are registered in Redis the way the
runner does (``shared/capture_state.open_rollout``) and released afterwards.

For each worker count (1, then N):
- **added latency** at 2k / 20k / 60k-token prompts: per episode, call 1 (a new chain: full render) and call 2
  (extends the chain: suffix render + splice) through the gateway (OpenAI chat, non-streaming), then — at once,
  so both see the same machine — the same prompt ids (read back from the recorded token segments) straight to
  the upstream; p50/p99 of gateway − direct per call kind, and the gateway's own stage times
  (``calls.notes.gateway_ms``). Episodes come in pairs, as rollouts of a GRPO group do: the first of a pair sends
  a prompt no call sent before (``new_chain``: every turn tokenized), the second the same prompt again
  (``new_chain_group``: its turns come from the gateway's turn cache, ``chat_format.TurnCache``);
- **streaming**: the same three kinds of call, each with a plain-text reply streamed (2k prompt, the upstream
  sleeps 10 ms per token), ``--streaming-episodes`` of them: time to first byte and the delay between consecutive
  chunks, through the gateway and direct; each call's prompt goes straight to the upstream at once after its
  episode, and the TTFB the gateway adds is the p50 of those pairs' differences (as the added latency above), which
  a spell of a slower VM moves far less than the difference of two p50s taken seconds apart;
- **requests/s at concurrency 32 and 128**: two-call episodes (2k prompts) through the gateway, in groups of
  ``GROUP`` episodes that share their first prompt (a new one per group), then the same number of requests with
  the same prompt ids direct. Each side first runs one unmeasured round at that concurrency (the gateway's with
  prompts of its own, its records written before the measured round), so both are measured with connection
  pools filled to the concurrency — a serving gateway's steady state — not while opening them; with the CPU seconds each part of the machine spent per request (client = this
  process, upstream, gateway processes, the rest: Postgres, Redis, anything else running).
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import click
import numpy as np

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message
from shared.machine import describe_machine, load_average
from shared.ports import free_port
from shared.scratch_db import scratch_database

REPO_ROOT = Path(__file__).resolve().parents[1]
FILLER = (
    "def handler(request, retries=3):\n    # keep the last value seen\n    return request.value + retries\n"
)
TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
]  # fmt: skip
STREAM_TEXT = " ".join(f"step {i} of the plan is done;" for i in range(24))
TOKEN_DELAY_S = 0.01
KINDS = ("new_chain", "new_chain_group", "spliced")
"""A call with a prompt never sent before, one with the prompt of the group's previous rollout, and a spliced call."""
GROUP = 8
"""Episodes of the throughput run that share their first prompt (a GRPO group's rollouts)."""
THROUGHPUT_EPISODES = 2048
"""Measured episodes (two calls each) per concurrency level: 10-20 s of load on a 2-core VM. On a VM whose speed moves
by half within minutes, single rounds ranged over 32-73 % of direct within one run (2026-12-05); more and longer
alternations keep the sums steadier than the 512 episodes in 4 rounds used before."""
THROUGHPUT_ROUNDS = 8
"""Gateway and direct rounds alternate this many times per concurrency level (the figures are their sums)."""
STREAMING_EPISODES = 40
"""Streamed episodes (~2.7 s each with their direct calls): 20 new prompts, 20 group's next, 40 spliced calls. With
the 20 episodes used until 2026-12-06 and the difference of two p50s, a new prompt's TTFB over direct read +2.8 and
+6.0 ms in two runs of one build."""
FILE_CREATE_SETTLED_US = 30.0
"""Creating a file under the data directory costs 12-19 µs of CPU on a quiet VM here (2026-12-05/06)."""
FILE_CREATE_WAIT_S = 420.0
"""How long the bench waits at most for file creation to settle before it measures anyway (and says so): ext4's
window is 60 s after a removal, 360 s while the inode table block is dirty (2026-12-06: 90 s after a bench run's
removal and ``os.sync``, once over 150 s)."""


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
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


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children that exited (``/proc/<pid>/stat``)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def machine_cpu_seconds() -> float:
    """CPU seconds the whole machine spent (all cores, not idle), from ``/proc/stat``."""
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = sum(values) - values[3] - values[4]  # minus idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


class Rollouts:
    """Rollout rows in the scratch database, their keys registered in Redis as the runner does."""

    def __init__(self, database_url: str, redis_url: str) -> None:
        import redis

        from shared.db import make_engine, session_factory, session_scope
        from shared.ids import new_id
        from shared.models import Run, Task
        from shared.run_config import RunConfig

        self.engine = make_engine(database_url)
        self.sessions = session_factory(self.engine)
        self.redis = redis.Redis.from_url(redis_url)
        self.keys: list[str] = []
        self.run_id, self.task_id = new_id("run"), new_id("task")
        with session_scope(self.sessions) as session:
            session.add(Run.create(self.run_id, RunConfig(model="policy", harness="reference", group_size=1)))
            session.add(Task(id=self.task_id, dataset="bench", instance_id=self.task_id, spec={}))

    def make(self, count: int) -> list[tuple[str, str]]:
        from shared import capture_state
        from shared.db import session_scope
        from shared.ids import new_id, new_rollout_key
        from shared.models import Rollout

        out = [(new_id("ro"), new_rollout_key()) for _ in range(count)]
        with session_scope(self.sessions) as session:
            for rollout_id, key in out:
                session.add(
                    Rollout(
                        id=rollout_id,
                        run_id=self.run_id,
                        task_id=self.task_id,
                        harness="reference",
                        rollout_key=key,
                        status="running",
                    )
                )
        for rollout_id, key in out:
            binding = capture_state.Binding(rollout_id, self.run_id, "reference", {}, time.time())
            capture_state.open_rollout(self.redis, key, binding)
        self.keys += [key for _, key in out]
        return out

    def recorded(self, key: str) -> None:
        from shared import capture_state

        result = capture_state.wait_recorded(self.redis, key, timeout_s=120)
        if not result.complete:
            raise click.ClickException(f"the gateway lost records: {result.error}")

    def close(self) -> None:
        from shared import capture_state

        for key in self.keys:
            capture_state.release(self.redis, key)
        self.redis.close()
        self.engine.dispose()


def recorded_calls(
    rollouts: Rollouts, store_dir: Path, rollout_id: str
) -> list[tuple[list[int], dict[str, float]]]:
    """Per call of the rollout (in position order): the exact prompt ids the gateway sent upstream, and its own
    stage times."""
    from sqlalchemy import select

    from shared.db import session_scope
    from shared.models import Call
    from shared.objectstore import LocalObjectStore
    from shared.trajectory import load_chain

    store = LocalObjectStore(store_dir)
    with session_scope(rollouts.sessions) as session:
        calls = list(
            session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.position))
        )
        if len({c.chain_id for c in calls}) != 1 or any(c.fork_reason for c in calls):
            forks = [c.fork_reason for c in calls]
            raise click.ClickException(
                f"the gateway did not splice rollout {rollout_id}'s calls (forks: {forks})"
            )
        chain = load_chain(store, calls, rollout_id=rollout_id)
        return [
            (
                chain.ids[: chain.prompt_length(c.position)].tolist(),
                dict(c.notes.get("gateway_ms") or {}),
            )
            for c in calls
        ]


def prompt_of_size(chat_format: ChatFormat, tokens: int) -> str:
    """A user message whose first-call prompt renders to about ``tokens`` tokens."""
    per_copy = len(chat_format.encode(FILLER))
    copies = max(1, tokens // per_copy)
    text = FILLER * copies
    base = len(
        chat_format.render_prompt(
            Conversation(provider_api="openai_chat", messages=[Message(role="user", content=text)])
        )
    )
    return FILLER * max(1, copies - (base - tokens) // per_copy)


BENCH_NONCE = f"{os.getpid()}-{time.time_ns()}"


def group_prompt(text: str, group: str) -> str:
    """``text`` as the task of ``group``: a first line that no other group (of this or an earlier bench) has, so
    the group's first call finds none of its user turn in a cache."""
    return f"Task {group} of bench {BENCH_NONCE}.\n{text}"


def group_of(section: str, episode: int) -> tuple[str, str]:
    """Latency and streaming episodes come in pairs that share a prompt: (the pair, the first call's kind). Pairs
    run one after the other on one keep-alive connection, so both calls of a pair reach the same gateway worker."""
    return f"{section}-{episode // 2}", KINDS[episode % 2]


class Client:
    def __init__(self, gateway_url: str, upstream_url: str, session: aiohttp.ClientSession) -> None:
        self.gateway_url, self.upstream_url, self.session = gateway_url, upstream_url, session

    async def episode(self, key: str, user_text: str) -> tuple[float, float]:
        """Two calls of one rollout: a new chain, then a spliced extension. Returns their latencies (s)."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "bench"},
            {"role": "user", "content": user_text},
        ]
        latencies = []
        for _ in range(2):
            body = {"model": "policy", "messages": messages, "tools": TOOLS, "max_tokens": 64}
            start = time.perf_counter()
            async with self.session.post(
                f"{self.gateway_url}/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
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

    async def direct(self, prompt_ids: list[int], stream: bool = False) -> list[float]:
        """One upstream request with these ids: arrival times (s from the start) of each chunk, then the end."""
        body = {
            "model": "policy",
            "token_ids": prompt_ids,
            "sampling_params": {"max_tokens": 64, "logprobs": 1, "skip_special_tokens": True},
            "output_mode": "text",
            "stream": stream,
        }
        return await self._timed(self.session.post(f"{self.upstream_url}/inference/v1/generate", json=body))

    async def streamed(self, key: str, user_text: str) -> tuple[list[float], list[float]]:
        """Two streamed calls of one rollout (a new chain, then its splice): each one's chunk arrival times."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "bench"},
            {"role": "user", "content": user_text},
        ]
        marks = []
        for _ in range(2):
            body = {"model": "policy", "messages": messages, "stream": True, "max_tokens": 64}
            request = self.session.post(
                f"{self.gateway_url}/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
            body_bytes = bytearray()
            marks.append(await self._timed(request, body_bytes))
            messages += [{"role": "assistant", "content": streamed_text(bytes(body_bytes))}]
            messages += [{"role": "user", "content": "go on"}]
        return marks[0], marks[1]

    @staticmethod
    async def _timed(request: Any, into: bytearray | None = None) -> list[float]:
        start = time.perf_counter()
        marks = []
        async with request as r:
            if r.status != 200:
                raise click.ClickException(f"answered {r.status}: {await r.text()}")
            async for chunk in r.content.iter_any():
                marks.append(time.perf_counter() - start)
                if into is not None:
                    into += chunk
        return marks + [time.perf_counter() - start]


def streamed_text(body: bytes) -> str:
    """The assistant text of an OpenAI chat completion stream (server-sent events)."""
    parts = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


async def measure_latency(
    client: Client, rollouts: Rollouts, store_dir: Path, text: str, episodes: int
) -> dict[str, Any]:
    added: dict[str, list[float]] = {k: [] for k in KINDS}
    gateway: dict[str, list[float]] = {k: [] for k in KINDS}
    direct: dict[str, list[float]] = {k: [] for k in KINDS}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in KINDS}
    prompt_tokens = 0
    for episode in range(episodes):
        ((rollout_id, key),) = rollouts.make(1)  # opened just before its first call, as the runner does
        group, first_kind = group_of(f"latency-{len(text)}", episode)
        through = await client.episode(key, group_prompt(text, group))
        await asyncio.to_thread(rollouts.recorded, key)
        calls = await asyncio.to_thread(recorded_calls, rollouts, store_dir, rollout_id)
        prompt_tokens = len(calls[0][0])
        for kind, spent, (prompt, stage_ms) in zip((first_kind, "spliced"), through, calls, strict=True):
            straight = (await client.direct(prompt))[-1]
            gateway[kind].append(spent * 1000)
            direct[kind].append(straight * 1000)
            added[kind].append((spent - straight) * 1000)
            for stage, ms in stage_ms.items():
                stages[kind].setdefault(stage, []).append(ms)
    return {
        "prompt_tokens": prompt_tokens,
        **{
            kind: {
                "gateway_p50_ms": percentile(gateway[kind], 50),
                "direct_p50_ms": percentile(direct[kind], 50),
                "added_p50_ms": percentile(added[kind], 50),
                "added_p99_ms": percentile(added[kind], 99),
                "stages_p50_ms": {s: percentile(v, 50) for s, v in stages[kind].items()},
            }
            for kind in KINDS
        },
    }


async def measure_streaming(
    client: Client, rollouts: Rollouts, store_dir: Path, text: str, episodes: int
) -> dict[str, Any]:
    # the upstream is the scripted policy (a test fixture this bench runs in its own process): its answer to an
    # empty update is the scripts it has now, put back once the streamed episodes are done
    async with client.session.post(f"{client.upstream_url}/script", json={}) as response:
        prior_scripts = (await response.json())["scripts"]
    await client.session.post(
        f"{client.upstream_url}/script",
        json={"token_delay_s": TOKEN_DELAY_S, "script": [{"say": STREAM_TEXT}]},
    )
    through: dict[str, list[list[float]]] = {k: [] for k in KINDS}
    straight: dict[str, list[list[float]]] = {k: [] for k in KINDS}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in KINDS}
    try:
        for episode in range(episodes):
            # opened just before its first call, as the runner does: the binding is fresh (the streamed episodes
            # take seconds each, and a rollout opened long before would have its row re-read on its first call)
            ((rollout_id, key),) = rollouts.make(1)
            group, first_kind = group_of("streaming", episode)
            marks = await client.streamed(key, group_prompt(text, group))
            await asyncio.to_thread(rollouts.recorded, key)
            calls = await asyncio.to_thread(recorded_calls, rollouts, store_dir, rollout_id)
            for kind, call_marks, (prompt, stage_ms) in zip(
                (first_kind, "spliced"), marks, calls, strict=True
            ):
                through[kind].append(call_marks)
                straight[kind].append(await client.direct(prompt, stream=True))
                for stage, ms in stage_ms.items():
                    stages[kind].setdefault(stage, []).append(ms)
    finally:
        await client.session.post(
            f"{client.upstream_url}/script", json={"token_delay_s": 0.0, "scripts": prior_scripts}
        )

    def added(kind: str) -> list[float]:
        """Each call's TTFB less that of its own prompt sent direct right after its episode (ms)."""
        return [(g[0] - d[0]) * 1000 for g, d in zip(through[kind], straight[kind], strict=True)]

    def summary(runs: list[list[float]]) -> dict[str, float]:
        gaps = [(b - a) * 1000 for marks in runs for a, b in zip(marks[:-2], marks[1:-1], strict=True)]
        return {
            "ttfb_p50_ms": percentile([m[0] * 1000 for m in runs], 50),
            "ttfb_p99_ms": percentile([m[0] * 1000 for m in runs], 99),
            "inter_chunk_p50_ms": percentile(gaps, 50),
            "inter_chunk_p99_ms": percentile(gaps, 99),
            "total_p50_ms": percentile([m[-1] * 1000 for m in runs], 50),
        }

    return {
        kind: {
            "gateway": summary(through[kind]),
            "direct": summary(straight[kind]),
            "ttfb_added_p50_ms": percentile(added(kind), 50),
            "ttfb_added_p99_ms": percentile(added(kind), 99),
            "calls": len(through[kind]),
            "stages_p50_ms": {s: percentile(v, 50) for s, v in stages[kind].items()},
        }
        for kind in KINDS
    }


async def run_concurrently(concurrency: int, jobs: list[Any], work: Callable[[Any], Awaitable[int]]) -> int:
    queue = list(jobs)

    async def worker() -> int:
        done = 0
        while queue:
            done += await work(queue.pop())
        return done

    return sum(await asyncio.gather(*(worker() for _ in range(concurrency))))


class CpuMeter:
    """CPU seconds of the client (this process), the upstream, the gateway processes and the whole machine."""

    def __init__(self, upstream: int, gateway: int) -> None:
        self.pids = {"client": os.getpid(), "upstream": upstream}
        self.gateway = gateway

    def read(self) -> dict[str, float]:
        gateway_pids = [self.gateway, *children_of(self.gateway)]
        out = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        out["gateway"] = sum(cpu_seconds(pid) for pid in gateway_pids)
        out["machine"] = machine_cpu_seconds()
        return out

    def spent(self, before: dict[str, float]) -> dict[str, float]:
        """CPU seconds since ``before`` (a ``read``), with ``other`` = the machine's less the three named."""
        after = self.read()
        spent = {k: after[k] - before[k] for k in before}
        spent["other"] = spent.pop("machine") - spent["client"] - spent["upstream"] - spent["gateway"]
        return spent


def per_request_ms(spent: dict[str, float], requests: int) -> dict[str, float]:
    return {k: round(v * 1000 / requests, 2) for k, v in spent.items()}


def _add(total: dict[str, float], spent: dict[str, float]) -> None:
    for k, v in spent.items():
        total[k] = total.get(k, 0.0) + v


async def measure_throughput(
    client: Client,
    rollouts: Rollouts,
    store_dir: Path,
    text: str,
    concurrency: int,
    meter: CpuMeter,
    episodes: int = THROUGHPUT_EPISODES,
) -> dict[str, Any]:
    """Requests/s of the gateway and of its upstream called directly, in ``THROUGHPUT_ROUNDS`` alternating rounds
    (gateway, direct, gateway, ...), so a VM that slows down or speeds up during the run moves both sides alike;
    the figures are the rounds' sums."""

    async def episode(job: tuple[str, str]) -> int:
        await client.episode(*job)
        return 2

    def jobs_of(keys: list[tuple[str, str]], label: str) -> list[tuple[str, str]]:
        return [(key, group_prompt(text, f"{label}-{i // GROUP}")) for i, (_, key) in enumerate(keys)]

    async def one(prompt: list[int]) -> int:
        await client.direct(prompt)
        return 1

    # Unmeasured first: one round at this concurrency with prompts of its own, so the measured rounds meet the
    # connection pools (client → gateway, gateway → upstream, Redis, Postgres) filled to this concurrency and the
    # processes' heaps grown to it, as in a gateway that has been serving a fleet, and not the cost of getting
    # there; its prompts are never sent again. (A warm-up of one episode per connection left the first measured
    # round at c=32 a quarter slower than the three after it, on both sides of the ratio's gateway.)
    per_round = max(episodes // THROUGHPUT_ROUNDS, concurrency)
    warm_keys = rollouts.make(per_round)
    await run_concurrently(concurrency, jobs_of(warm_keys, f"c{concurrency}-warm"), episode)
    for _, key in warm_keys:  # its records are in before the measured rounds start
        await asyncio.to_thread(rollouts.recorded, key)
    prompts = [p for p, _ in await asyncio.to_thread(recorded_calls, rollouts, store_dir, warm_keys[0][0])]
    await run_concurrently(
        concurrency, [prompts[i % 2] for i in range(concurrency * 2)], one
    )  # the same, direct
    rounds: list[dict[str, Any]] = []
    gateway_cpu: dict[str, float] = {}
    direct_cpu: dict[str, float] = {}
    for index in range(THROUGHPUT_ROUNDS):
        keys = rollouts.make(per_round)
        jobs = jobs_of(keys, f"c{concurrency}-r{index}")
        before, start = meter.read(), time.perf_counter()
        requests = await run_concurrently(concurrency, jobs, episode)
        elapsed = time.perf_counter() - start
        _add(gateway_cpu, meter.spent(before))
        for _, key in keys:  # the records are written behind: count the time to the last one
            await asyncio.to_thread(rollouts.recorded, key)
        recorded_elapsed = time.perf_counter() - start
        before, start = meter.read(), time.perf_counter()
        direct_requests = await run_concurrently(concurrency, [prompts[i % 2] for i in range(requests)], one)
        direct_elapsed = time.perf_counter() - start
        _add(direct_cpu, meter.spent(before))
        rounds.append(
            {
                "requests": requests,
                "gateway_s": elapsed,
                "gateway_recorded_s": recorded_elapsed,
                "direct_requests": direct_requests,
                "direct_s": direct_elapsed,
                "ratio": (requests / elapsed) / (direct_requests / direct_elapsed),
            }
        )
    requests = sum(r["requests"] for r in rounds)
    direct_requests = sum(r["direct_requests"] for r in rounds)
    return {
        "concurrency": concurrency,
        "group": GROUP,
        "warmed": True,
        "requests": requests,
        "gateway_requests_per_s": requests / sum(r["gateway_s"] for r in rounds),
        "gateway_recorded_requests_per_s": requests / sum(r["gateway_recorded_s"] for r in rounds),
        "direct_requests_per_s": direct_requests / sum(r["direct_s"] for r in rounds),
        "gateway_cpu_ms_per_request": per_request_ms(gateway_cpu, requests),
        "direct_cpu_ms_per_request": per_request_ms(direct_cpu, direct_requests),
        "rounds": rounds,
    }


async def measure_gateway(
    gateway_url: str,
    upstream_url: str,
    rollouts: Rollouts,
    store_dir: Path,
    chat_format: ChatFormat,
    sizes: list[int],
    episodes: int,
    concurrencies: list[int],
    meter: CpuMeter,
    workers: int,
    throughput_episodes: int = THROUGHPUT_EPISODES,
    streaming_episodes: int = STREAMING_EPISODES,
) -> dict[str, Any]:
    results: dict[str, Any] = {"workers": workers, "load_start": load_average(), "latency": {}}
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=600)
    ) as session:
        client = Client(gateway_url, upstream_url, session)
        text_2k = await asyncio.to_thread(prompt_of_size, chat_format, 2000)
        for i, (_, key) in enumerate(
            rollouts.make(4 * workers)
        ):  # warm every worker (id blocks, connections)
            await client.episode(key, group_prompt(text_2k, f"warm-{i}"))
        for size in sizes:
            text = await asyncio.to_thread(prompt_of_size, chat_format, size)
            results["latency"][f"{size // 1000}k"] = await measure_latency(
                client, rollouts, store_dir, text, episodes
            )
        if streaming_episodes:
            results["streaming"] = await measure_streaming(
                client, rollouts, store_dir, text_2k, streaming_episodes
            )
        results["throughput"] = [
            await measure_throughput(client, rollouts, store_dir, text_2k, c, meter, throughput_episodes)
            for c in concurrencies
        ]
    results["load_end"] = load_average()
    return results


def print_table(results: dict[str, Any]) -> None:
    runs = results["runs"]
    click.echo(f"gateway benchmark — {results['machine']}; upstream: {results['upstream']}")
    click.echo(
        "drift check " + ("on" if results["measure_drift"] else "off") + "; loads at start/end of each run: "
        + "; ".join(f"{r['workers']} worker(s) {r['load_start']} → {r['load_end']}" for r in runs)
    )  # fmt: skip
    objects = results["objects"]
    click.echo(
        f"objects under {objects['directory']} (creating a file there: {objects['file_create_us']} µs of CPU; "
        f"{objects['file_create_first_us']} µs at first, waited {objects['file_create_waited_s']} s for it to settle)"
    )
    header = f"{'prompt':>7} {'call':>15}" + "".join(
        " " + f"{r['workers']}w added p50/p99".rjust(22) for r in runs
    )
    click.echo(header + f" {'direct p50':>11}")
    for size in runs[0]["latency"]:
        for kind in KINDS:
            row = f"{runs[0]['latency'][size]['prompt_tokens']:>7} {kind:>15}"
            for r in runs:
                cell = r["latency"][size][kind]
                row += f" {cell['added_p50_ms']:>10.1f} / {cell['added_p99_ms']:>6.1f} ms"
            click.echo(row + f" {runs[0]['latency'][size][kind]['direct_p50_ms']:>8.1f} ms")
    for r in runs:
        for kind in KINDS if "streaming" in r else ():
            s = r["streaming"][kind]
            click.echo(
                f"streaming {kind}, {r['workers']} worker(s): TTFB added p50/p99 {s['ttfb_added_p50_ms']:.1f}/"
                f"{s['ttfb_added_p99_ms']:.1f} ms over {s['calls']} calls (TTFB p50 {s['gateway']['ttfb_p50_ms']:.1f} "
                f"ms vs direct {s['direct']['ttfb_p50_ms']:.1f}); inter-chunk p50/p99 "
                f"{s['gateway']['inter_chunk_p50_ms']:.1f}/{s['gateway']['inter_chunk_p99_ms']:.1f} ms vs direct "
                f"{s['direct']['inter_chunk_p50_ms']:.1f}/{s['direct']['inter_chunk_p99_ms']:.1f}"
            )
    for r in runs:
        for t in r["throughput"]:
            click.echo(
                f"c={t['concurrency']:<4} {r['workers']} worker(s): gateway {t['gateway_requests_per_s']:.1f} req/s "
                f"(records in: {t['gateway_recorded_requests_per_s']:.1f}), direct {t['direct_requests_per_s']:.1f} "
                f"req/s = {t['gateway_requests_per_s'] / t['direct_requests_per_s']:.0%} (rounds: "
                + " ".join(f"{one['ratio']:.0%}" for one in t["rounds"])
                + f"); CPU ms/request "
                f"{t['gateway_cpu_ms_per_request']} (direct {t['direct_cpu_ms_per_request']})"
            )


@click.command("gateway")
@click.option(
    "--settle-s",
    default=FILE_CREATE_WAIT_S,
    show_default=True,
    help="Wait at most this long for creating a file under the data directory to cost what it does on a quiet "
    "machine (ext4 slows down for minutes after many files were removed); 0 measures at once.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--workers", default=2, show_default=True, help="N: measure 1 gateway process, then N.")
@click.option("--sizes", default="2000,20000,60000", show_default=True, help="Prompt sizes in tokens.")
@click.option("--episodes", default=20, show_default=True, help="Two-call episodes per prompt size.")
@click.option(
    "--streaming-episodes",
    default=STREAMING_EPISODES,
    show_default=True,
    help="Streamed two-call episodes (half of them start a new prompt, half send their pair's again); 0: none.",
)
@click.option("--concurrency", default="32,128", show_default=True, help="Concurrency levels for requests/s.")
@click.option(
    "--throughput-episodes",
    default=THROUGHPUT_EPISODES,
    show_default=True,
    help="Measured two-call episodes per concurrency level (at least one per connection).",
)
@click.option(
    "--measure-drift/--no-measure-drift",
    default=True,
    show_default=True,
    help="Run the gateway with the per-call retemplate drift check (its default) or without.",
)
def bench_gateway(
    settle_s: float,
    as_json: bool,
    workers: int,
    sizes: str,
    episodes: int,
    streaming_episodes: int,
    concurrency: str,
    throughput_episodes: int,
    measure_drift: bool,
) -> None:
    """Added latency, streaming and throughput of the gateway against its upstream called directly."""
    from shared.settings import get_settings

    settings = get_settings()
    model_dir = settings.resolved_model_dir
    size_list = [int(s) for s in sizes.split(",") if s.strip()]
    levels = [int(c) for c in concurrency.split(",") if c.strip()]
    results: dict[str, Any] = {"machine": describe_machine(), "runs": []}
    # The objects go where the product keeps them (the data directory), not in the system's temporary directory:
    # the gateway creates two files per call, and what that costs is the filesystem's — once it has settled from
    # whatever removed many files there last (``settle_file_creation``).
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-gw-", dir=settings.data_dir) as tmp,
        scratch_database(settings.database_url) as db_url,
    ):
        tmp_path = Path(tmp)
        settled = settle_file_creation(tmp_path, settle_s)
        results["objects"] = {
            "directory": str(settings.data_dir),
            "file_create_us": settled["us"],
            "file_create_first_us": settled["first_us"],
            "file_create_waited_s": settled["waited_s"],
        }
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
        if not (model_dir / "tokenizer.json").exists():
            model_dir = tmp_path / "model"
            subprocess.run([sys.executable, "-m", "services.cli.main", "model", "init-tiny", str(model_dir)], check=True, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
        upstream_port = free_port()
        upstream_url = f"http://127.0.0.1:{upstream_port}"
        logs = open(tmp_path / "processes.log", "wb")  # noqa: SIM115 - closed below
        upstream = subprocess.Popen([sys.executable, "-m", "tests.fixtures.scripted_policy", "--model-dir", str(model_dir), "--port", str(upstream_port)], env=env, cwd=REPO_ROOT, stdout=logs, stderr=subprocess.STDOUT)  # fmt: skip
        rollouts = Rollouts(db_url, settings.redis_url)
        try:
            _wait_http(upstream_url + "/health", upstream)
            chat_format = ChatFormat.load(model_dir)
            for count in sorted({1, workers}):
                gateway_port = free_port()
                gateway_url = f"http://127.0.0.1:{gateway_port}"
                gateway_env = {
                    **env,
                    "HARNESSRL_DATABASE_URL": db_url,
                    "HARNESSRL_OBJECT_STORE_URL": f"file://{tmp_path / 'objects'}",
                    "HARNESSRL_DATA_DIR": str(tmp_path),
                    "HARNESSRL_MODEL_DIR": str(model_dir),
                    "HARNESSRL_GATEWAY_PORT": str(gateway_port),
                    "HARNESSRL_GATEWAY_SOCKET": str(tmp_path / f"gateway-{gateway_port}.sock"),
                    "HARNESSRL_INFERENCE_URLS": json.dumps([upstream_url]),
                    "HARNESSRL_MAX_MODEL_LEN": str(max(size_list, default=2000) + 10_000),
                    "HARNESSRL_REDIS_URL": settings.redis_url,
                }
                serve = [
                    sys.executable,
                    "-m",
                    "services.cli.main",
                    "serve",
                    "gateway",
                    "--workers",
                    str(count),
                ]
                serve += [] if measure_drift else ["--no-measure-drift"]
                gateway = subprocess.Popen(serve, env=gateway_env, cwd=REPO_ROOT, stdout=logs, stderr=subprocess.STDOUT)  # fmt: skip
                try:
                    _wait_http(gateway_url + "/healthz", gateway)
                    meter = CpuMeter(upstream.pid, gateway.pid)
                    results["runs"].append(
                        asyncio.run(
                            measure_gateway(
                                gateway_url,
                                upstream_url,
                                rollouts,
                                tmp_path / "objects",
                                chat_format,
                                size_list,
                                episodes,
                                levels,
                                meter,
                                count,
                                throughput_episodes,
                                streaming_episodes,
                            )  # fmt: skip
                        )
                    )
                finally:
                    _stop(gateway)
        finally:
            rollouts.close()
            _stop(upstream)
            logs.close()
    os.sync()  # the objects just removed leave ext4's recently-deleted window sooner (settle_file_creation)
    results["upstream"] = "scripted policy server (tests/fixtures/scripted_policy.py), ~40-token replies"
    results["measure_drift"] = measure_drift
    if as_json:
        click.echo(json.dumps(results))
    else:
        print_table(results)


def file_create_us(directory: Path, files: int = 200) -> float:
    """CPU µs to create one empty file in ``directory``: the filesystem's share of an object write. The files are
    kept (they go with the bench's directory at its end): removing them here would slow every file the gateway
    creates in the next minute (``settle_file_creation``)."""
    probe = Path(tempfile.mkdtemp(prefix="create-probe-", dir=directory))
    start = time.process_time()
    for i in range(files):
        os.close(os.open(probe / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    spent = time.process_time() - start
    return round(spent / files * 1e6, 1)


def settle_file_creation(directory: Path, wait_s: float = FILE_CREATE_WAIT_S) -> dict[str, float]:
    """Wait until creating a file in ``directory`` costs what it does on a quiet machine, for at most
    ``FILE_CREATE_WAIT_S``; returns the first and the last probe and the wait.

    Why: ext4 without a journal (this VM's root filesystem) will not reuse an inode freed in the last 60 s (360 s
    while its inode table block is dirty) and checks every such free slot it passes, in the buffer cache, for each
    new inode. After a run that removed its ~10,000 objects (this bench's own end, a test suite), creating a file
    there cost 95-510 µs instead of 12-19 (2026-12-06: kernel ``recently_deleted`` and ``find_get_block_common``
    were 10 % of the gateway's CPU in ``perf``), which moved requests/s by more than anything measured here. The
    bench measures the gateway, so it waits for that to pass (``os.sync`` first: clean blocks leave the window at
    60 s) and records it."""
    os.sync()
    first = last = file_create_us(directory)
    started = time.monotonic()
    while last > FILE_CREATE_SETTLED_US and time.monotonic() - started < wait_s:
        time.sleep(10)
        last = file_create_us(directory)
    return {"first_us": first, "us": last, "waited_s": round(time.monotonic() - started, 1)}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
