"""``harnessrl demo``: the main job on the embedded default — a real GRPO run through every service.

It builds the tiny model if needed, starts the suite (``harnessrl up``'s supervisor), creates a run on the
bundled ``swe_mini`` tasks with the reference harness (and any installed CLI harness named with
``--harness``), follows it to the end with a progress display, and prints a summary: steps, rollouts, reward
per step, policy versions, tokens, fork rate and time per stage, plus the reward-curve PNG path.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

from services.cli.up import running_suite
from shared.db import make_engine
from shared.settings import Settings, get_settings

DEMO_TASKS = ["minstats-1", "durations-2", "textkit-1", "intervals-1"]


def _api(settings: Settings, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(
        f"http://{settings.host}:{settings.api_port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {settings.api_token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            payload = resp.read()
            return json.loads(payload) if resp.headers.get_content_type() == "application/json" else payload
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise click.ClickException(f"api {method} {path}: {exc.code} {detail}") from None


SUMMARY_SQL = """
SELECT g.step,
       count(*)                                   AS rollouts,
       count(rw.id)                               AS graded,
       avg(rw.reward)                             AS reward_mean,
       min(t.min_policy_version)                  AS min_version,
       max(t.max_policy_version)                  AS max_version,
       sum(t.n_calls)                             AS calls,
       sum(t.prompt_tokens + t.completion_tokens) AS tokens,
       sum(t.n_forks)::float / nullif(sum(t.n_chains), 0) AS fork_rate,
       avg(t.duration_s)                          AS rollout_s,
       avg(rw.grading_s)                          AS grading_s
FROM groups g
JOIN rollouts r ON r.group_id = g.id
JOIN trajectories t ON t.rollout_id = r.id
LEFT JOIN rewards rw ON rw.rollout_id = r.id
WHERE g.run_id = :run
GROUP BY g.step ORDER BY g.step
"""

STEPS_SQL = (
    "SELECT step, policy_version, loss, step_time_s, groups_trained, groups_zero_variance FROM steps "
    "WHERE run_id = :run ORDER BY step"
)


def summary_tables(settings: Settings, run_id: str) -> tuple[Table, Table]:
    engine = make_engine(settings.database_url)
    with engine.connect() as conn:
        sampled = conn.execute(text(SUMMARY_SQL), {"run": run_id}).mappings().all()
        steps = conn.execute(text(STEPS_SQL), {"run": run_id}).mappings().all()
    engine.dispose()
    fmt = lambda v, spec=".2f": "-" if v is None else format(v, spec)  # noqa: E731
    rollouts = Table(title="Rollouts per sampling step")
    for col in (
        "step",
        "rollouts",
        "graded",
        "reward",
        "policy versions",
        "calls",
        "tokens",
        "fork rate",
        "rollout s",
        "grading s",
    ):
        rollouts.add_column(col, justify="right")
    for r in sampled:
        rollouts.add_row(
            str(r["step"]),
            str(r["rollouts"]),
            str(r["graded"]),
            fmt(r["reward_mean"]),
            f"{r['min_version']}..{r['max_version']}",
            str(r["calls"]),
            str(r["tokens"]),
            fmt(r["fork_rate"]),
            fmt(r["rollout_s"], ".1f"),
            fmt(r["grading_s"], ".1f"),
        )
    learner = Table(title="Learner steps")
    for col in ("step", "published version", "loss", "step s", "groups trained", "zero-variance groups"):
        learner.add_column(col, justify="right")
    for s in steps:
        learner.add_row(
            str(s["step"]),
            str(s["policy_version"]),
            fmt(s["loss"], ".4f"),
            fmt(s["step_time_s"], ".1f"),
            str(s["groups_trained"]),
            str(s["groups_zero_variance"]),
        )
    return rollouts, learner


@click.command()
@click.option("--steps", default=3, show_default=True, help="GRPO steps to run.")
@click.option("--group-size", default=4, show_default=True, help="Rollouts per task per step.")
@click.option("--tasks", "n_tasks", default=2, show_default=True, help="Bundled tasks per step.")
@click.option(
    "--harness",
    default="reference",
    show_default=True,
    type=click.Choice(["reference", "codex", "claude-code", "qwen-code", "pi"]),
)
@click.option("--timeout-min", default=30.0, show_default=True, help="Give up after this many minutes.")
@click.option(
    "--quiet/--verbose", default=True, help="Hide service logs (they go to <data_dir>/logs/up.log)."
)
def demo(steps: int, group_size: int, n_tasks: int, harness: str, timeout_min: float, quiet: bool) -> None:
    """Run a real GRPO run end to end on the tiny model and print a summary."""
    console = Console()
    settings = get_settings()
    started = time.monotonic()
    with running_suite(settings, echo=not quiet) as suite:
        s = suite.settings
        console.print(
            f"[bold]suite up[/] in {time.monotonic() - started:.0f}s — logs: {s.data_dir / 'logs' / 'up.log'}"
        )
        run = _api(
            s,
            "POST",
            "/v1/runs",
            {
                "name": "demo",
                "model": s.served_model_name,
                "harness": harness,
                "dataset": "swe_mini",
                "instance_ids": DEMO_TASKS[:n_tasks] if n_tasks <= len(DEMO_TASKS) else None,
                "groups_per_step": n_tasks,
                "group_size": group_size,
                "steps": steps,
                "grpo": {"learning_rate": 1e-4},
                "sampling": {"temperature": 1.0, "max_tokens": 256},
            },
        )
        run_id = run["id"]
        console.print(
            f"run [bold]{run_id}[/]: {steps} steps x {n_tasks} tasks x {group_size} rollouts ({harness})"
        )
        deadline = time.monotonic() + timeout_min * 60
        total = steps * n_tasks * group_size
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            rollouts_bar = progress.add_task("rollouts graded", total=total)
            steps_bar = progress.add_task("learner steps", total=steps)
            while True:
                suite.tick()
                detail = _api(s, "GET", f"/v1/runs/{run_id}")
                progress.update(rollouts_bar, completed=detail["progress"]["rollouts_done"])
                progress.update(steps_bar, completed=detail["progress"]["steps_done"])
                if detail["status"] in ("completed", "failed", "stopped"):
                    break
                if time.monotonic() > deadline:
                    _api(s, "POST", f"/v1/runs/{run_id}/stop")
                    raise click.ClickException(f"demo run {run_id} did not finish in {timeout_min} minutes")
                time.sleep(2)
        png = _api(s, "GET", f"/v1/runs/{run_id}/plot")
        out = Path(s.data_dir) / "demo" / f"{run_id}-reward.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
        rollouts, learner = summary_tables(s, run_id)
        console.print(rollouts)
        console.print(learner)
        console.print(
            f"run {run_id} {detail['status']} in {time.monotonic() - started:.0f}s; "
            f"policy version {detail['policy_version']}; reward curve: {out}"
        )
        if detail["status"] != "completed":
            raise click.ClickException(f"run ended {detail['status']}: {detail.get('error')}")
