"""The agent path: an unmodified multi-turn agent (mini-swe-agent, its text-based config) learning on the small model
(``harnessrl bench learning --harness mini-swe-agent``); ``--harness claude-code-bare`` runs the same path through
``claude -p --bare`` (tool calls, a budget of 8 turns: ``AGENT_HARNESSES``).

A 135M model does not start calling tools or writing fenced actions by itself (0 of 65 calls did, through three
harnesses). The procedure is the practitioners' one, every stage through the REST API of one suite:

1. **demonstrations**: an eval of the ``train`` split answered by ``--teacher reference`` (the built-in
   demonstrator: ``ls``, ``cat`` the file, write it whole with the fix, run the tests, submit, through
   mini-swe-agent's own protocol), one rollout per task, graded like any;
2. **SFT** (``POST /v1/sft``) on the demonstrations that resolved their task (cross-entropy on the teacher's
   tokens only, through the same chains, masks and trie packing as GRPO);
3. **evals** of the base weights and of the SFT version on the held-out ``eval`` split (28 function families that
   neither the demonstrations nor training ever show), with the same eval seed, so their samples pair up;
4. **GRPO** from the SFT version (``init``) through mini-swe-agent on the train split, and an eval of its last
   version (skipped with ``--steps 0``).

Reported: pass@1 of each eval with the paired change base → SFT and SFT → RL (``shared/paired_stats.py``), and
per eval the agent's turns (``turn_figures``): model calls per rollout, the share of the policy's replies that are
well-formed actions (exactly one ``mswea_bash_command`` block, mini-swe-agent's own ``action_regex``), tokens,
chains and forks per rollout, how the rollouts ended; the SFT run's loss per step; the wall time of each stage.
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import click
from sqlalchemy import text

from benchmarks.inference import measure_throughput
from benchmarks.recipe import (
    DATASET,
    EvalResult,
    Progress,
    Recipe,
    api,
    collect,
    evaluate,
    follow_run,
    run_eval,
    step_metrics,
    train,
)
from shared.db import make_engine
from shared.harnesses import harness_config
from shared.sampling_seed import stream_seed
from shared.settings import Settings

AGENT = "mini-swe-agent"
AGENT_HARNESS: dict[str, Any] = {"name": AGENT, "config": "mini_textbased", "step_limit": 8}
"""mini-swe-agent with the text-based config it ships (one fenced bash block per answer, no tools); 8 model calls
at most: the demonstration takes 5 (look, read, write, test, submit)."""
AGENT_HARNESSES: dict[str, dict[str, Any]] = {
    AGENT: AGENT_HARNESS,
    "claude-code-bare": {"name": "claude-code", "bare": True, "max_turns": 8},
}
"""``--harness`` of the agent path -> the harness it runs: mini-swe-agent (text actions), or Claude Code with
``--bare`` (three tools: ``Bash``, ``Edit``, ``Read``; the demonstration's actions are ``Bash`` calls) and a budget
of 8 turns."""
ACTION = re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.DOTALL)
"""mini-swe-agent's ``action_regex`` (``litellm_textbased_model.py``): a reply is an action when it holds exactly
one match."""


def text_actions(harness: dict[str, Any]) -> bool:
    """Whether the harness takes its actions as text (mini-swe-agent's ``mini_textbased``), not as tool calls."""
    return harness["name"] == AGENT and harness.get("config", "mini_textbased") == "mini_textbased"


@dataclass(frozen=True)
class AgentRecipe:
    """Everything that decides an agent learning run (the module docstring for the stages)."""

    demo_tasks: int = 40
    """Train tasks demonstrated (a seeded draw of the 178), one rollout each: 40 demonstrations of 5 replies each
    took the SFT loss from 1.5 to 0.008 in 10 steps and held-out pass@1 from 0 to 22 % (2026-12-07,
    docs/perf/learning.md#the-agent-path-mini-swe-agent-on-the-small-model)."""
    sft_epochs: int = 2
    sft_learning_rate: float = 1e-4
    sft_batch_rollouts: int = 8
    base_eval: bool = True
    """Evaluate the base weights (the base → SFT pair). The base eval of a seed is the same in every run of it (its
    samples are seeded), so ``--no-base-eval`` skips it where it is on record: 0/108 for seed 0 (2026-12-07)."""
    rl: Recipe = field(
        default_factory=lambda: Recipe(
            harness=AGENT_HARNESS,
            curriculum=None,
            max_tokens=384,
            eval_samples=1,
            steps=8,
            group_size=4,
            groups_per_step=4,
            train_tasks=32,
        )  # fmt: skip
    )
    """The evals' and the GRPO run's settings (``benchmarks/recipe.py``): mini-swe-agent, no curriculum (the
    bundled solve rates are the ``codeblock`` harness's), 384 tokens a reply (the write step is the file whole)."""

    @property
    def seed(self) -> int:
        return self.rl.seed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


AGENT_RECIPE = AgentRecipe()


@dataclass
class AgentResult:
    recipe: dict[str, Any]
    demonstrations: EvalResult
    sft_run: str
    sft_steps: list[dict[str, Any]]
    eval_base: EvalResult | None
    eval_sft: EvalResult
    train_run: str | None = None
    eval_rl: EvalResult | None = None
    reward_per_step: list[float] = field(default_factory=list)
    grpo_steps: list[dict[str, Any]] = field(default_factory=list)
    grpo_timing: dict[str, Any] | None = None
    """Where the GRPO run's time went (``services/cli/step_figures.py``): the share of its wall time inference and
    the learner were busy, seconds per step, the trained tokens' policy lag."""
    stage_wall_s: dict[str, float] = field(default_factory=dict)
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``turn_figures`` of each eval (and of the demonstrations and the GRPO run), by stage name."""


def demonstrate(suite: Any, settings: Settings, recipe: AgentRecipe, progress: Progress) -> EvalResult:
    """Stage 1: the reference teacher through the agent on a seeded draw of ``demo_tasks`` train tasks."""
    from shared.datasets import load_dataset

    train_split = recipe.rl.splits[0]
    task_ids = [t.instance_id for t in load_dataset(DATASET, train_split)]
    random.Random(stream_seed(recipe.seed, "demo_tasks")).shuffle(task_ids)
    body = {
        "name": "demonstrations", "harness": recipe.rl.harness, "dataset": DATASET, "split": train_split,
        "instance_ids": task_ids[: recipe.demo_tasks], "samples": 1, "teacher": {"kind": "reference"},
        "sampling": {"max_tokens": recipe.rl.max_tokens},
    }  # fmt: skip
    return run_eval(suite, settings, body, progress)


def fine_tune(suite: Any, settings: Settings, recipe: AgentRecipe, demos: str, progress: Progress) -> str:
    """Stage 2: SFT on the demonstrations that resolved their task; returns the SFT run once it completed."""
    body = {
        "name": "sft-demonstrations", "from_run": demos, "min_reward": 1.0, "epochs": recipe.sft_epochs,
        "batch_rollouts": recipe.sft_batch_rollouts, "learning_rate": recipe.sft_learning_rate,
        "seed": stream_seed(recipe.seed, "sft"),
        "grpo": {"bf16_autocast": recipe.rl.bf16_autocast},
    }  # fmt: skip
    created = api(settings, "POST", "/v1/sft", body)
    return follow_run(suite, settings, str(created["id"]), "sft run", progress)


def run_agent_learning(
    suite: Any, settings: Settings, recipe: AgentRecipe, progress_for: Any
) -> AgentResult:  # fmt: skip
    """The four stages of the module docstring."""
    from shared.datasets import load_dataset

    walls: dict[str, float] = {}
    eval_split = recipe.rl.splits[1]
    eval_total = len(load_dataset(DATASET, eval_split)) * recipe.rl.eval_samples

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.monotonic()
        out = fn(*args)
        walls[name] = time.monotonic() - t0
        return out

    demos = timed("demonstrations_s", demonstrate, suite, settings, recipe,
                  progress_for("demonstrations (reference teacher)", recipe.demo_tasks))  # fmt: skip
    sft_run = timed("sft_s", fine_tune, suite, settings, recipe, demos.run_id, progress_for("SFT steps", 1))
    base = None
    if recipe.base_eval:
        base = timed("eval_base_s", evaluate, suite, settings, recipe.rl, eval_split, "eval-base",
                     progress_for("eval base weights", eval_total))  # fmt: skip
    sft = timed("eval_sft_s", evaluate, suite, settings, recipe.rl, eval_split, "eval-sft",
                progress_for("eval SFT version", eval_total), sft_run)  # fmt: skip
    result = AgentResult(
        recipe=recipe.as_dict(), demonstrations=demos, sft_run=sft_run, sft_steps=learner_steps(step_metrics(settings, sft_run)),
        eval_base=base, eval_sft=sft, stage_wall_s=walls,
    )  # fmt: skip
    if recipe.rl.steps > 0:
        rl = replace(recipe.rl, init=sft_run)
        result.train_run = timed("grpo_s", train, suite, settings, rl, progress_for("GRPO steps", rl.steps))
        result.eval_rl = timed("eval_rl_s", evaluate, suite, settings, rl, eval_split, "eval-rl",
                               progress_for("eval GRPO version", eval_total), result.train_run)  # fmt: skip
        result.reward_per_step = collect(settings, result.train_run)[0]
        rows = step_metrics(settings, result.train_run)
        result.grpo_steps, result.grpo_timing = learner_steps(rows), grpo_timing(rows)
    stages = {"demonstrations": demos.run_id, "eval_sft": sft.run_id}
    if base is not None:
        stages["eval_base"] = base.run_id
    if result.train_run is not None and result.eval_rl is not None:
        stages |= {"grpo": result.train_run, "eval_rl": result.eval_rl.run_id}
    textual = text_actions(dict(recipe.rl.harness))  # type: ignore[arg-type]
    result.turns = {name: turn_figures(settings, run, textual) for name, run in stages.items()}
    return result


def learner_steps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An SFT or GRPO run's steps: loss, reward, tokens trained, computed and their lower bound (the batch's
    distinct prefix tokens), step time."""
    from shared.step_record import StepRecord

    records = [StepRecord.from_row(s) for s in rows]
    return [
        {
            "step": r.step,
            "loss": r.update.loss,
            "reward_mean": r.update.reward_mean,
            "groups_trained": r.groups_trained,
            "loss_tokens": r.update.loss_tokens,
            "tokens_computed": r.update.tokens_computed,
            "tokens_lower_bound": r.update.tokens_lower_bound,
            "step_time_s": r.step_time_s,
        }
        for r in records
    ]


def grpo_timing(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``step_figures`` of the GRPO run's steps (None when no step carries a window)."""
    from services.cli.step_figures import step_figures

    timing = step_figures(rows)
    return None if timing is None else timing.as_dict()


CALLS_SQL = """
SELECT r.id AS rollout, c.id AS call_id, c.chain_id, c.fork_reason, c.prompt_tokens, c.completion_tokens,
       c.finish_reason, c.tokens_key, c.tool_call_count, c.parse_error
FROM rollouts r LEFT JOIN calls c ON c.rollout_id = r.id
WHERE r.run_id = :run ORDER BY r.id, c.position
"""


def turn_figures(settings: Settings, run_id: str, textual: bool = True) -> dict[str, Any]:
    """How the rollouts of ``run_id`` went as agent loops: model calls, chains and forks per rollout (median,
    mean), prompt and completion tokens per rollout, the share of the replies that are well-formed actions
    (``textual``: exactly one ``ACTION`` block; else a tool call the gateway parsed, ``tool_call_count`` > 0 and no
    ``parse_error``: a closing sentence is then no action, so a five-step demonstration scores 4 of 5), and
    how the rollouts ended (the last attempt's reason, e.g. mini-swe-agent's step limit or its repeated format
    errors; ``submitted`` for one that ended by itself)."""
    from transformers import AutoTokenizer

    with make_engine(settings.database_url).connect() as conn:
        rows = conn.execute(text(CALLS_SQL), {"run": run_id}).mappings().all()
    by_rollout: dict[str, list[Any]] = {}
    ended = rollout_ends(settings, run_id)
    for row in rows:
        by_rollout.setdefault(row["rollout"], [])
        if row["call_id"] is not None:
            by_rollout[row["rollout"]].append(row)
    tokenizer = AutoTokenizer.from_pretrained(str(settings.model_dir))
    all_calls = [r for calls in by_rollout.values() for r in calls]
    replies = reply_texts(settings, all_calls, tokenizer)
    well_formed = [is_action(row, reply, textual) for row, reply in zip(all_calls, replies, strict=True)]
    calls = [len(c) for c in by_rollout.values()]
    outcomes: dict[str, int] = {}
    for outcome in ended.values():
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    def summary(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "mean": statistics.fmean(values)} if values else {}

    return {
        "rollouts": len(by_rollout),
        "calls_per_rollout": summary([float(n) for n in calls]),
        "chains_per_rollout": summary([float(len({r["chain_id"] for r in c})) for c in by_rollout.values()]),
        "forks_per_rollout": summary(
            [float(sum(r["fork_reason"] is not None for r in c)) for c in by_rollout.values()]
        ),
        "prompt_tokens_per_rollout": summary(
            [float(sum(r["prompt_tokens"] for r in c)) for c in by_rollout.values()]
        ),
        "completion_tokens_per_rollout": summary(
            [float(sum(r["completion_tokens"] for r in c)) for c in by_rollout.values()]
        ),
        "replies": len(replies),
        "well_formed_share": sum(well_formed) / len(well_formed) if well_formed else None,
        "parse_errors": sum(r["parse_error"] is not None for r in all_calls),
        "cut_by_length": sum(r["finish_reason"] == "length" for c in by_rollout.values() for r in c),
        "outcomes": outcomes,
    }


def is_action(call: Any, reply: str, textual: bool) -> bool:
    """Whether a reply is a well-formed action: one ``ACTION`` block (``textual``), else a tool call the gateway
    parsed (``call``: its ``tool_call_count`` and ``parse_error``)."""
    if textual:
        return len(ACTION.findall(reply)) == 1
    return bool(call["tool_call_count"]) and call["parse_error"] is None


def rollout_ends(settings: Settings, run_id: str) -> dict[str, str]:
    """How each rollout of ``run_id`` ended: its last attempt's reason (``shared/rollout_records.py``), else
    ``submitted`` for a harness that ended by itself, else its harness outcome or status."""
    from sqlalchemy import select

    from shared.db import session_factory, session_scope
    from shared.models import Rollout
    from shared.rollout_records import read_meta

    ends = {}
    with session_scope(session_factory(make_engine(settings.database_url))) as session:
        for rollout in session.scalars(select(Rollout).where(Rollout.run_id == run_id)):
            last = read_meta(rollout).last_attempt
            reason = last.reason if last is not None else None
            completed = "submitted" if rollout.harness_outcome == "completed" else None
            ends[rollout.id] = str(reason or completed or rollout.harness_outcome or rollout.status)
    return ends


def reply_texts(settings: Settings, rows: list[Any], tokenizer: Any) -> list[str]:
    """The text of each call's reply (its sampled ids, decoded)."""
    from shared.objectstore import open_store
    from shared.trajectory import fetch_segments

    segments = fetch_segments(open_store(settings), [row["tokens_key"] for row in rows])
    texts = []
    for row in rows:
        segment = segments[row["tokens_key"]]
        if isinstance(segment, Exception):
            raise click.ClickException(f"call {row['call_id']}: its tokens cannot be read ({segment})")
        texts.append(tokenizer.decode([int(i) for i in segment.sampled_ids], skip_special_tokens=True))
    return texts


def agent_arm(settings: Settings, recipe: AgentRecipe, quiet: bool) -> dict[str, Any]:
    """The agent procedure in a suite of its own: its figures (``--json``) and, under ``table``, its table."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from benchmarks.learning_seeds import paired_figures
    from services.cli.up import running_suite
    from shared.machine import describe_machine

    machine_start = describe_machine()
    started = time.monotonic()
    with running_suite(settings, echo=not quiet) as suite, Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=Console(stderr=True),
    ) as progress:  # fmt: skip

        def progress_for(label: str, total: int) -> Any:
            bar = progress.add_task(label, total=total)
            return lambda done, total_now: progress.update(bar, completed=done, total=total_now)

        result = run_agent_learning(suite, suite.settings, recipe, progress_for)
        paired = {}
        if result.eval_base is not None:
            paired["base_to_sft"] = paired_figures(
                suite.settings, result.eval_base.run_id, result.eval_sft.run_id
            )
        if result.eval_rl is not None:
            paired["sft_to_rl"] = paired_figures(
                suite.settings, result.eval_sft.run_id, result.eval_rl.run_id
            )
        engine = None
        if result.train_run is not None:
            engine = asyncio.run(
                measure_throughput(
                    suite.settings.resolved_inference_urls[0], recipe.rl.runner_concurrency,
                    ENGINE_REQUESTS_PER_CLIENT, recipe.rl.max_tokens,
                )
            )  # fmt: skip
    figures = asdict(result) | {
        "agent": harness_config(**recipe.rl.harness).first_call_name,  # type: ignore[arg-type]
        "evals": {name: _eval_figures(ev) for name, ev in
                  (("demonstrations", result.demonstrations), ("base", result.eval_base), ("sft", result.eval_sft),
                   ("rl", result.eval_rl)) if ev is not None},
        "paired": paired, "machine_start": machine_start, "machine_end": describe_machine(),
        "total_wall_s": time.monotonic() - started, "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }  # fmt: skip
    grpo_turns = result.turns.get("grpo")
    figures["throughput"] = (
        None if engine is None or grpo_turns is None or result.grpo_timing is None
        else throughput_figures(grpo_turns, result.grpo_timing, engine)
    )  # fmt: skip
    figures["table"] = agent_table(figures)
    return figures


ENGINE_REQUESTS_PER_CLIENT = 2


def throughput_figures(
    turns: dict[str, Any], timing: dict[str, Any], engine: dict[str, Any]
) -> dict[str, Any]:
    """The agent loop's sampling rate beside the engine's own: the GRPO rollouts' sampled tokens over the run's
    wall time (first sampling to last commit) and over the time inference was busy, against ``bench inference``'s
    measure (``engine``: clients at the run's runner concurrency, each sending requests of the run's ``max_tokens``
    to the same vLLM, after the run)."""
    sampled = turns["completion_tokens_per_rollout"].get("mean", 0.0) * turns["rollouts"]
    busy_s = timing["wall_s"] * timing["inference_busy_fraction"]
    loop = sampled / timing["wall_s"] if timing["wall_s"] else 0.0
    return {
        "loop_sampled_tokens": sampled,
        "loop_tokens_per_s": loop,
        "loop_tokens_per_inference_busy_s": sampled / busy_s if busy_s else None,
        "engine_tokens_per_s": engine["tokens_per_s"],
        "engine_concurrency": engine["concurrency"],
        "loop_over_engine": loop / engine["tokens_per_s"] if engine["tokens_per_s"] else None,
    }


def _eval_figures(result: EvalResult) -> dict[str, Any]:
    return {"run": result.run_id, "passed": result.passed, "samples": result.samples,
            "pass_at_1": result.pass_at_1, "interval_95": list(result.interval), "wall_s": result.wall_s}  # fmt: skip


def agent_table(figures: dict[str, Any]) -> str:
    """The one-run table of ``agent_arm``'s figures."""
    lines = [f"agent learning bench ({figures.get('agent', AGENT)}) — start: {figures['machine_start']}; end: {figures['machine_end']}",
             "", "| stage | pass@1 (95 %) | well-formed replies | calls per rollout, median | tokens per rollout "
             "(prompt / completion, mean) | chains / forks per rollout (mean) | wall |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    walls = figures["stage_wall_s"]
    wall_of = {
        "demonstrations": "demonstrations_s",
        "base": "eval_base_s",
        "sft": "eval_sft_s",
        "rl": "eval_rl_s",
    }
    turns_of = {"demonstrations": "demonstrations", "base": "eval_base", "sft": "eval_sft", "rl": "eval_rl"}
    for name, ev in figures["evals"].items():
        t = figures["turns"].get(turns_of[name], {})
        share = t.get("well_formed_share")
        formed = "-" if share is None else f"{share:.0%} of {t['replies']}"
        lo, hi = ev["interval_95"]
        lines.append(
            f"| {name} | {ev['pass_at_1']:.1%} ({ev['passed']}/{ev['samples']}; {lo:.0%}-{hi:.0%}) | "
            f"{formed} | "
            f"{t.get('calls_per_rollout', {}).get('median', '-')} | "
            f"{t.get('prompt_tokens_per_rollout', {}).get('mean', 0):,.0f} / "
            f"{t.get('completion_tokens_per_rollout', {}).get('mean', 0):,.0f} | "
            f"{t.get('chains_per_rollout', {}).get('mean', 0):.2f} / {t.get('forks_per_rollout', {}).get('mean', 0):.2f} | "
            f"{walls.get(wall_of[name], 0) / 60:.1f} min |"
        )
    losses = [s["loss"] for s in figures["sft_steps"]]
    lines.append("")
    if losses:
        lines.append(f"SFT ({figures['sft_run']}): {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
                     f"{walls.get('sft_s', 0) / 60:.1f} min")  # fmt: skip
    for name, paired in figures["paired"].items():
        lines.append(f"paired {name.replace('_', ' ')}: {_paired_text(paired)}")
    if figures["reward_per_step"]:
        rewards = ", ".join(f"{r:.2f}" for r in figures["reward_per_step"])
        lines.append(f"GRPO ({figures['train_run']}) training reward per step: {rewards}; "
                     f"{walls.get('grpo_s', 0) / 60:.1f} min")  # fmt: skip
    if timing := figures.get("grpo_timing"):
        lines.append(f"GRPO time: inference busy {timing['inference_busy_fraction']:.0%}, learner busy "
                     f"{timing['learner_busy_fraction']:.0%} of {timing['wall_s'] / 60:.1f} min over {timing['steps']} "
                     f"steps ({timing['wall_s_per_step']:.0f} s a step), policy lag {timing['policy_lag_mean']:.2f}")  # fmt: skip
    if speed := figures.get("throughput"):
        busy = speed["loop_tokens_per_inference_busy_s"]
        lines.append(f"GRPO sampled {speed['loop_tokens_per_s']:.0f} tokens/s over its wall time"
                     f"{'' if busy is None else f' ({busy:.0f} while inference was busy)'}; vLLM's own at concurrency "
                     f"{speed['engine_concurrency']}: {speed['engine_tokens_per_s']:.0f} tokens/s "
                     f"(the loop {speed['loop_over_engine']:.0%} of it)")  # fmt: skip
    for name in ("sft_steps", "grpo_steps"):
        steps = figures.get(name) or []
        computed = sum(s["tokens_computed"] for s in steps)
        bound = sum(s["tokens_lower_bound"] or 0 for s in steps)
        if steps and bound:
            lines.append(f"{name.split('_')[0].upper()} learner tokens computed {computed:,.0f} against a lower bound "
                         f"of {bound:,.0f} ({computed / bound:.2f}x)")  # fmt: skip
    for name, t in figures["turns"].items():
        ended = ", ".join(f"{k}: {v}" for k, v in sorted(t["outcomes"].items(), key=lambda kv: -kv[1]))
        lines.append(f"{name}: rollouts ended — {ended}")
    lines.append(f"total wall time {figures['total_wall_s'] / 60:.1f} min")
    return "\n".join(lines)


def _paired_text(paired: dict[str, Any]) -> str:
    lo, hi = paired["interval_95"]
    return (f"delta {100 * paired['delta']:+.1f} points, 95 % {100 * lo:+.1f} to {100 * hi:+.1f} "
            f"(McNemar p {paired['mcnemar_p']:.3g}, {paired['pairs']} pairs)")  # fmt: skip
