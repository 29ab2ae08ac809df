"""``harnessrl run create|list|status|watch|add-tasks|stop|plot|logdir``: runs through the REST API.

Every command talks to the api (``--api``, default ``http://<host>:<api_port>`` from settings, or
``$HARNESSRL_API_URL``) with the settings' ``api_token``, and prints tables for people or, with ``--json``,
the api's JSON documents unchanged for scripts. ``watch`` redraws progress and a terminal reward curve (and the
eval pass@1 curve of a run with ``config.eval``) until the run ends. ``logdir`` prints where the run's
TensorBoard event files are (``shared/tensorboard.py``; no api needed).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from services.api.client import ApiClient, ApiClientError, default_api_url
from services.cli.step_figures import step_figures, step_records
from services.cli.tables import Col, Listing
from services.cli.teacher import teacher_options, teacher_section
from shared.harnesses import HARNESS_NAMES
from shared.settings import load_settings
from shared.statuses import RUN_FINISHED
from shared.tasks import TaskError, load_tasks

FINISHED = tuple(str(s) for s in RUN_FINISHED)
BLOCKS = " ▁▂▃▄▅▆▇█"

api_option = click.option(
    "--api", "api_url", envvar="HARNESSRL_API_URL", default=None, help="API base URL (default from settings)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the api's JSON (for scripts).")


@contextmanager
def api_client(api_url: str | None) -> Iterator[ApiClient]:
    """An api client; an api error ends the command with its message (exit 1) instead of a traceback."""
    settings = load_settings()
    client = ApiClient(api_url or default_api_url(settings), settings.api_token)
    try:
        yield client
    except ApiClientError as exc:
        click.echo(f"harnessrl: {exc}", err=True)
        sys.exit(1)
    finally:
        client.close()


def _print_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, sort_keys=True))


def _key_values(pairs: tuple[str, ...], option: str) -> dict[str, Any]:
    """``k=v`` pairs; values are JSON when they parse (numbers, booleans, null), else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def reward_chart(values: list[float | None], height: int = 6, low: float = 0.0, high: float = 1.0) -> str:
    """A bar chart of one value per step in ``height`` text rows (eighth-block resolution), y axis on the left."""
    if not values:
        return "(no graded steps yet)"
    known = [v for v in values if v is not None]
    top, bottom = max([high, *known]), min([low, *known])
    span = (top - bottom) or 1.0
    levels = [None if v is None else round((v - bottom) / span * height * 8) for v in values]
    rows = []
    for row in range(height, 0, -1):
        # Label the top of the top and middle rows and the base of the bottom row.
        value = bottom if row == 1 else bottom + span * row / height
        label = f"{value:6.2f} │" if row in (height, height // 2, 1) else "       │"
        cells = []
        for level in levels:
            fill = 0 if level is None else min(max(level - (row - 1) * 8, 0), 8)
            cells.append(BLOCKS[fill] * 2)
        rows.append(label + " ".join(cells))
    rows.append("       └" + "─" * (3 * len(values)))
    rows.append("   step " + " ".join(f"{i:<2d}"[-2:] for i in range(len(values))))
    return "\n".join(rows)


def _curve(run: dict[str, Any]) -> list[float | None]:
    by_step = {p["step"]: p["reward_mean"] for p in run["reward_curve"]}
    last = max([*by_step, run["current_step"] or 0]) if by_step or run["current_step"] is not None else -1
    return [by_step.get(step) for step in range(last + 1)]


def _step_text(run: dict[str, Any]) -> str:
    """Learner steps done of those asked for; while a run samples, which sampling step (numbered from 1)."""
    if run["steps"] is None:  # the stored config does not validate (config_error says why)
        return f"{run.get('steps_done', 0)} done; config invalid"
    done = f"{run.get('steps_done', 0)}/{run['steps']} done"
    if run["status"] in FINISHED or run["current_step"] is None:
        return done
    return f"{done}, sampling step {run['current_step'] + 1}"


def _summary_table(run: dict[str, Any]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    progress = run["progress"]
    rows = [
        ("run", f"{run['id']}  {run['name']}".strip()),
        ("status", run["status"] + (f"  ({run['error']})" if run.get("error") else "")),
        *([("config error", run["config_error"])] if run.get("config_error") else []),
        ("harness / model", f"{run['harness']} / {run['model']}"),
        ("steps", _step_text(run)),
        ("policy version", str(run["policy_version"])),
        (
            "tasks × group",
            f"{progress['tasks'] if progress['tasks'] is not None else '?'} × {run['group_size']}",
        ),
        ("rollouts", ", ".join(f"{k} {v}" for k, v in sorted(progress["rollouts"].items())) or "none"),
    ]
    if figures := step_figures(run.get("step_metrics") or []):
        rows += [
            (
                "time per step",
                f"{figures.wall_s_per_step:.1f} s; busy: inference {figures.inference_busy_fraction:.0%}, "
                f"learner {figures.learner_busy_fraction:.0%}",
            ),
            (
                "policy lag",
                f"mean {figures.policy_lag_mean:.2f}, max {figures.policy_lag_max} (trained tokens)",
            ),
        ]
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # long values wrap, ids stay whole
    for key, value in rows:
        table.add_row(Text(key, style="bold"), value)
    return table


def _steps_table(run: dict[str, Any]) -> Listing:
    table = Listing(
        [Col("step", whole=True, keep=True), Col("reward", whole=True, keep=True), Col("std", whole=True, drop=2),
         Col("resolved", whole=True, drop=1), Col("rollouts", whole=True, drop=1)],
        title="reward per sampling step",
    )  # fmt: skip
    for point in run["reward_curve"]:
        table.add_row(
            str(point["step"]),
            f"{point['reward_mean']:.3f}",
            f"{point['reward_std']:.3f}",
            f"{point['resolved_rate']:.0%}",
            str(point["rollouts"]),
        )
    return table


def _learner_table(run: dict[str, Any]) -> Listing:
    """Per learner step; ``wall s`` is the step's window (previous commit to this one) and the busy columns the
    share of it inference (≥ 1 call generating) and the learner (update, publish, commit) were busy. In a narrow
    terminal the columns to the right are left out first (step, version and loss stay)."""
    headers = ("step", "version", "loss", "kl", "clip", "tokens", "lag mean", "lag max", "time s", "wall s",
               "inference busy", "learner busy")  # fmt: skip
    table = Listing(
        [Col(h, whole=True, keep=i < 3, drop=i, justify="right") for i, h in enumerate(headers)],
        title="learner steps",
    )

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for r in step_records(run["step_metrics"]):
        w = r.window
        table.add_row(
            str(r.step), str(r.policy_version), fmt(r.update.loss, ".4f"), fmt(r.kl, ".5f"),
            fmt(r.update.clip_fraction, ".3f"), str(int(r.update.tokens_computed)), fmt(r.policy_lag_mean, ".2f"),
            str(r.policy_lag_max), fmt(r.step_time_s, ".1f"), fmt(w and w.wall_s, ".1f"),
            fmt(w and w.inference_busy_fraction, ".0%"), fmt(w and w.learner_busy_fraction, ".0%"),
        )  # fmt: skip
    return table


def _watch_view(run: dict[str, Any], width: int) -> Group:
    progress = run["progress"]
    done, total = progress["rollouts_done"], max(progress["rollouts_total"], 1)
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        "rollouts", ProgressBar(total=total, completed=done, width=40), f"{done}/{progress['rollouts_total']}"
    )
    bar.add_row("steps", ProgressBar(total=run["steps"], completed=progress["steps_done"], width=40),
                f"{progress['steps_done']}/{run['steps'] if run['steps'] is not None else '?'}")  # fmt: skip
    parts = [_summary_table(run), bar, Text("\nmean reward per step"), Text(reward_chart(_curve(run)))]
    if run.get("eval_curve"):
        parts += [
            Text("\neval pass@1 (config.eval) by step"),
            Text(reward_chart(_eval_curve(run))),
            _evals_table(run).fitted_table(width),
        ]
    return Group(*parts)


def _eval_curve(run: dict[str, Any]) -> list[float | None]:
    """Eval pass@1 at each step an eval ran before (None where none ran or it has not ended)."""
    by_step = {p["at_step"]: p["pass_at_1"] for p in run["eval_curve"]}
    return [by_step.get(step) for step in range(max(by_step) + 1)]


def _evals_table(run: dict[str, Any]) -> Listing:
    table = Listing(
        [Col("before step", whole=True, drop=1), Col("version", whole=True, drop=2),
         Col("pass@1", whole=True, keep=True), Col("95% CI", whole=True, drop=3), Col("samples", whole=True, drop=4),
         Col("eval", whole=True, keep=True)],
        title="evals (config.eval)",
    )  # fmt: skip
    for p in run["eval_curve"]:
        done = p["pass_at_1"] is not None
        table.add_row(
            str(p["at_step"]), str(p["version"]), f"{p['pass_at_1']:.3f}" if done else p["status"],
            f"{p['pass_at_1_low']:.3f}-{p['pass_at_1_high']:.3f}" if done else "", str(p["samples"] or ""),
            p["eval_id"],
        )  # fmt: skip
    return table


def _task_source(
    dataset: str | None, tasks_file: Path | None, instance_ids: tuple[str, ...]
) -> dict[str, Any]:
    """The task-source fields of a request body; a tasks file is sent inline (validated here first), so the
    api need not see this machine's files."""
    if tasks_file is None and dataset is None:
        raise click.UsageError("name the tasks with --dataset NAME or --tasks-file FILE.jsonl")
    source: dict[str, Any] = {}
    if dataset is not None:
        source["dataset"] = dataset
    if instance_ids:
        source["instance_ids"] = list(instance_ids)
    if tasks_file is not None:
        try:
            source["tasks"] = [task.model_dump(mode="json") for task in load_tasks(tasks_file)]
        except TaskError as exc:
            raise click.BadParameter(str(exc), param_hint="--tasks-file") from None
        source.setdefault("dataset", tasks_file.stem)
    return source


def init_from(text: str) -> dict[str, Any]:
    """``RUN`` or ``RUN@VERSION`` as the body's ``init`` (``shared/run_config.py: InitFrom``)."""
    run_id, at, version = text.partition("@")
    if not run_id or (at and not version.isdigit()):
        raise click.BadParameter(f"expected RUN or RUN@VERSION, got {text!r}", param_hint="--init")
    return {"run_id": run_id, "version": int(version)} if at else {"run_id": run_id}


@click.group()
def run() -> None:
    """Create, list, inspect, watch and stop training runs (through the REST API)."""


@run.command("create")
@click.option("--harness", required=True, type=click.Choice(HARNESS_NAMES), help="The harness to run.")
@click.option("--model", default=None, help="Model alias (default: the served model name).")
@click.option(
    "--dataset", default=None, help="Bundled dataset name (e.g. swe_mini), or a label for --tasks-file."
)
@click.option("--split", default=None, help="A split of the bundled dataset (e.g. train).")
@click.option(
    "--tasks-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="JSONL tasks."
)
@click.option("--instance", "instance_ids", multiple=True, help="Only these instance ids (repeatable).")
@click.option("--group-size", type=int, default=4, show_default=True)
@click.option("--groups-per-step", type=int, default=None, help="Tasks per step (default: all).")
@click.option("--steps", type=int, default=1, show_default=True)
@click.option("--name", default="")
@click.option("--harness-command", default=None, help="For --harness shell: a command with {instruction}.")
@click.option(
    "--harness-option",
    "harness_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Harness option (repeatable; values are JSON when they parse), e.g. bare=true for claude-code.",
)
@click.option("--grpo", "grpo", multiple=True, metavar="KEY=VALUE", help="GRPO setting (repeatable).")
@click.option(
    "--eval",
    "eval_",
    multiple=True,
    metavar="KEY=VALUE",
    help="Scheduled evals, e.g. every_steps=2 (config.eval).",
)
@click.option("--sampling", "sampling", multiple=True, metavar="KEY=VALUE", help="Sampling setting.")
@click.option(
    "--limit", "limits", multiple=True, metavar="KEY=VALUE", help="Rollout limit (e.g. wall_clock_s=600)."
)
@click.option(
    "--init",
    "init",
    default=None,
    metavar="RUN[@VERSION]",
    help="Start from another run's published version (an SFT run's; default its newest) instead of the base.",
)
@click.option("--idempotency-key", default=None, help="Repeat this create safely.")
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse, instead of warn, a harness whose first prompt does not fit the model.",
)
@teacher_options
@api_option
@json_option
def create(
    harness: str, model: str | None, dataset: str | None, split: str | None, tasks_file: Path | None, instance_ids: tuple[str, ...],
    group_size: int, groups_per_step: int | None, steps: int, name: str, harness_command: str | None,
    harness_options: tuple[str, ...], grpo: tuple[str, ...], eval_: tuple[str, ...], sampling: tuple[str, ...], limits: tuple[str, ...], init: str | None, idempotency_key: str | None,
    strict: bool, teacher: str | None, teacher_model: str | None, teacher_key_env: str | None, api_url: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Create a run; its first step's rollouts are queued at once. Settings are ``RunSpec`` fields
    (``shared/run_config.py``) by name: ``--grpo clip_high=0.3``, ``--limit wall_clock_s=600``. A request the api
    refuses (a bad field, ``--teacher reference`` on an eval split) exits 2 and creates nothing."""
    teacher_config = teacher_section(teacher, teacher_model, teacher_key_env)
    options = _key_values(harness_options, "--harness-option")
    if harness_command is not None:
        options["command"] = harness_command
    body: dict[str, Any] = {
        "name": name,
        "model": model or load_settings().served_model_name,
        "harness": {"name": harness, **options},
        "group_size": group_size,
        "steps": steps,
        "grpo": _key_values(grpo, "--grpo"),
        "eval": _key_values(eval_, "--eval"),
        "sampling": _key_values(sampling, "--sampling"),
        "limits": _key_values(limits, "--limit"),
        "strict": strict,
    }
    if teacher_config is not None:
        body["teacher"] = teacher_config
    if split is not None and tasks_file is not None:
        raise click.BadParameter(
            "selects from a bundled --dataset only, not from --tasks-file", param_hint="--split"
        )
    for key, value in (
        ("dataset", dataset),
        ("split", split),
        ("groups_per_step", groups_per_step),
    ):
        if value is not None:
            body[key] = value
    body.update(_task_source(dataset, tasks_file, instance_ids))
    if init is not None:
        body["init"] = init_from(init)
    with api_client(api_url) as client:
        try:
            created = client.create_run(body, idempotency_key)
        except ApiClientError as exc:
            if exc.status != 422:
                raise
            click.echo(f"harnessrl: {exc}", err=True)  # the request's fault, like a usage error
            sys.exit(2)
    for warning in created.get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        _print_json(created)
    else:
        Console().print(_summary_table(created))
        click.echo(f"\nwatch it: harnessrl run watch {created['id']}")


@run.command("list")
@click.option("--status", default=None, help="Only runs in this status.")
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True)
@click.option("--all", "every", is_flag=True, help="Follow the cursor through every page.")
@api_option
@json_option
def list_(status: str | None, limit: int, every: bool, api_url: str | None, as_json: bool) -> None:
    """Runs, newest first."""
    items: list[dict[str, Any]] = []
    with api_client(api_url) as client:
        cursor = None
        while True:
            page = client.list_runs(limit, cursor, status)
            items += page["items"]
            cursor = page["next_cursor"]
            if not every or cursor is None:
                break
    if as_json:
        _print_json({"items": items, "next_cursor": cursor})
        return
    table = Listing(
        [Col("id", whole=True, keep=True), Col("kind", whole=True, drop=3), Col("name", drop=4),
         Col("status", whole=True, keep=True), Col("harness", whole=True, drop=2), Col("steps", drop=1),
         Col("version", whole=True, drop=5), Col("created", drop=6)],
    )  # fmt: skip
    for item in items:
        table.add_row(item["id"], item.get("kind", "train"), item["name"], item["status"], item["harness"],
                      _step_text(item), str(item["policy_version"]), item["created_at"][:19].replace("T", " "))  # fmt: skip
    table.render()
    if cursor:
        click.echo("more runs: --all")


@run.command("status")
@click.argument("run_id")
@api_option
@json_option
def status(run_id: str, api_url: str | None, as_json: bool) -> None:
    """Progress, reward per step, learner metrics."""
    with api_client(api_url) as client:
        detail = client.get_run(run_id)
    if as_json:
        _print_json(detail)
        return
    console = Console()
    console.print(_summary_table(detail))
    if detail["reward_curve"]:
        _steps_table(detail).render(console)
    if detail["step_metrics"]:
        _learner_table(detail).render(console)
    if detail.get("eval_curve"):
        _evals_table(detail).render(console)


def watch_run(
    client: ApiClient,
    run_id: str,
    interval_s: float,
    render: Callable[[dict[str, Any]], None],
    timeout_s: float | None,
) -> dict[str, Any]:
    """Poll until the run finishes (or ``timeout_s``), handing each snapshot to ``render``; returns the last."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        detail = client.get_run(run_id)
        render(detail)
        if detail["status"] in FINISHED or (deadline is not None and time.monotonic() >= deadline):
            return detail
        time.sleep(interval_s)


@run.command("watch")
@click.argument("run_id")
@click.option(
    "--interval", "interval_s", type=float, default=2.0, show_default=True, help="Seconds between polls."
)
@click.option("--timeout", "timeout_s", type=float, default=None, help="Give up after this many seconds.")
@api_option
@json_option
def watch(
    run_id: str, interval_s: float, timeout_s: float | None, api_url: str | None, as_json: bool
) -> None:
    """Live progress and a terminal reward curve until the run ends (--json: one JSON line per poll)."""
    with api_client(api_url) as client:
        if as_json:
            final = watch_run(client, run_id, interval_s, lambda d: click.echo(json.dumps(d)), timeout_s)
        else:
            console = Console()
            with Live(console=console, auto_refresh=False) as live:
                final = watch_run(
                    client,
                    run_id,
                    interval_s,
                    lambda d: live.update(_watch_view(d, console.width), refresh=True),
                    timeout_s,
                )
    if final["status"] not in FINISHED:
        click.echo(f"harnessrl: run {run_id} still {final['status']} after {timeout_s}s", err=True)
        sys.exit(3)
    if final["status"] == "failed":
        sys.exit(1)


@run.command("add-tasks")
@click.argument("run_id")
@click.option("--dataset", default=None, help="Bundled dataset name, or a label for --tasks-file.")
@click.option(
    "--tasks-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="JSONL tasks."
)
@click.option("--instance", "instance_ids", multiple=True, help="Only these instance ids (repeatable).")
@api_option
@json_option
def add_tasks(
    run_id: str, dataset: str | None, tasks_file: Path | None, instance_ids: tuple[str, ...], api_url: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Attach more tasks to a running run; later steps sample them."""
    body = _task_source(dataset, tasks_file, instance_ids)
    with api_client(api_url) as client:
        added = client.add_tasks(run_id, body)
    if as_json:
        _print_json(added)
    else:
        click.echo(f"run {added['run_id']}: {len(added['added'])} task(s) added, {added['tasks']} in all")


@run.command("stop")
@click.argument("run_id")
@api_option
@json_option
def stop(run_id: str, api_url: str | None, as_json: bool) -> None:
    """Stop a run: queued rollouts are cancelled, running harnesses are killed (their rollouts cancelled)."""
    with api_client(api_url) as client:
        summary = client.stop_run(run_id)
    if as_json:
        _print_json(summary)
    else:
        click.echo(f"run {summary['id']}: {summary['status']}")


@run.command("logdir")
@click.argument("run_id")
def logdir(run_id: str) -> None:
    """Where the run's TensorBoard event files are (its learner steps and evals): `tensorboard --logdir DIR`."""
    from shared.tensorboard import remote_logdir, run_logdir

    settings = load_settings()
    click.echo(str(run_logdir(settings, run_id)))
    if (remote := remote_logdir(settings, run_id)) is not None:
        click.echo(remote)


@run.command("plot")
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PNG path (default: <run_id>.png).")  # fmt: skip
@api_option
def plot(run_id: str, output: Path | None, api_url: str | None) -> None:
    """Save the reward-curve PNG."""
    with api_client(api_url) as client:
        png = client.plot(run_id)
    target = output or Path(f"{run_id}.png")
    target.write_bytes(png)
    click.echo(str(target))
