"""``harnessrl eval``: evaluate a policy without training, through the same gateway, sandboxes and grader.

It creates an eval through the REST API (``POST /v1/evals``, ``services/api/evals.py``), waits for it (the eval
takes the inference pool in turn; the pool loads the evaluated policy), and prints pass@1 and pass@k with 95 %
intervals, or, with ``--json``, the eval's document (``GET /v1/evals/{id}``) as one JSON object. Its rollouts and
figures stay as rows (``evals``, and the eval run's ``rollouts``/``rewards``/``calls``; ``docs/sql-cookbook.md``).

A bad dataset, split, harness, run, version or model directory exits 2 with one line naming it, and creates
nothing (the api checks every field before it writes).

``harnessrl eval compare EVAL_A EVAL_B``: two evals of the same tasks, samples per task and seed (e.g. version 0
and version N of a run, both with ``--seed 7``) → Δ pass@1 (B − A) with its paired 95 % interval (per-task
cluster bootstrap) and McNemar's exact p (``shared/paired_stats.py``, which states the method), from each eval's
samples (``GET /v1/evals/{id}/samples``). Evals that are not comparable (other tasks or sample indices, other
seeds, unseeded, not finished) exit 2 naming the first mismatch.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from services.api.client import ApiClient, ApiClientError, default_api_url
from services.cli.teacher import teacher_options, teacher_section
from shared.harnesses import HARNESS_NAMES
from shared.paired_stats import NotComparable, PairedComparison, SampleOutcome, compare, pair_samples
from shared.settings import load_settings
from shared.statuses import RUN_FINISHED
from shared.tasks import TaskError, load_tasks

FINISHED = tuple(str(s) for s in RUN_FINISHED)
# The api's field paths, as the options that set them.
OPTION_OF = {
    "body.dataset": "--dataset", "body.split": "--split", "body.tasks": "--tasks-file", "body.run_id": "--run",
    "body.version": "--version", "body.model_dir": "--model-dir", "body.harness": "--harness",
    "body.samples": "--samples", "body.seed": "--seed", "body.instance_ids": "--instance",
    "body.sampling": "--sampling", "body.limits": "--limit", "body.issue": "--withhold-issue",
    "body.teacher": "--teacher",
}  # fmt: skip


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"harnessrl: {message.splitlines()[0]}", err=True)
    sys.exit(code)


def _as_option(error: ApiClientError) -> str:
    loc = error.detail[0]["loc"] if error.detail else ""
    message = error.detail[0]["msg"] if error.detail else error.message
    for prefix, option in OPTION_OF.items():
        if loc == prefix or loc.startswith(prefix + "."):
            return f"{option}{loc[len(prefix) :]}: {message}"
    return f"{loc}: {message}" if loc else message


def _key_values(pairs: tuple[str, ...], option: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            fail(f"{option}: expected KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def describe_policy(detail: dict[str, Any]) -> str:
    source, version = detail["source"], detail["version"]
    if source == "model_dir":
        return f"model directory {detail['model_dir']} (version 0)"
    if detail["source_run_id"] is None:
        return "the base weights (version 0)"
    kind = {"base": "base weights", "weights": "full weights", "adapter": "LoRA adapter"}[source]
    return f"run {detail['source_run_id']} version {version} ({kind})"


def figures_text(detail: dict[str, Any]) -> str:
    result = detail["result"]
    where = detail["dataset"] + (f"/{detail['split']}" if detail["split"] else "")
    lines = [
        f"eval {detail['id']} ({detail['status']}): {where}, {result['tasks'] if result else '?'} tasks × "
        f"{detail['samples_per_task']} samples, harness {detail['harness']}, policy {describe_policy(detail)}"
        + (f", seed {detail['seed']}" if detail["seed"] is not None else ""),
    ]
    if result is None:
        lines.append(f"no figures: {detail['error'] or 'not finished'}")
        return "\n".join(lines)
    lo, hi = result["pass_at_1_interval"]
    lines.append(
        f"pass@1 {result['pass_at_1']:.3f} (95% CI {lo:.3f}-{hi:.3f}; {result['passed']}/{result['samples']} "
        "samples passed" + (f", {result['failed']} ended without a reward" if result["failed"] else "") + ")"
    )
    lo, hi = result["pass_at_k_interval"]
    lines.append(
        f"pass@{result['k']} {result['pass_at_k']:.3f} (95% CI {lo:.3f}-{hi:.3f}; over {result['tasks']} tasks)"
    )
    lines.append(f"policy versions the calls recorded: {detail['policy_versions']}")
    return "\n".join(lines)


@click.group("eval", invoke_without_command=True)
@click.option(
    "--dataset", default=None, help="Bundled dataset (e.g. swe_micro), or a label for --tasks-file."
)
@click.option("--split", default=None, help="A split of the bundled dataset (e.g. eval).")
@click.option("--tasks-file", type=click.Path(dir_okay=False, path_type=Path), help="Your own JSONL tasks.")
@click.option("--instance", "instance_ids", multiple=True, help="Only these instance ids (repeatable).")
@click.option("--harness", default=None, help=f"One of: {', '.join(HARNESS_NAMES)} (required to evaluate).")
@click.option("--harness-command", default=None, help="For --harness shell: a command with {instruction}.")
@click.option(
    "--harness-option", "harness_options", multiple=True, metavar="KEY=VALUE", help="e.g. bare=true."
)
@click.option("--samples", type=int, default=1, show_default=True, help="Samples per task (k of pass@k).")
@click.option(
    "--run", "run_id", default=None, help="Evaluate this training run's version (default: base model)."
)
@click.option("--version", type=int, default=None, help="With --run: the version (default: its newest).")
@click.option(
    "--model-dir", default=None, help="Evaluate the weights of this model directory (same architecture)."
)
@click.option(
    "--seed", type=int, default=None, help="Sampling seed: the same seed samples the same calls again."
)
@click.option(
    "--withhold-issue", is_flag=True,
    help="Tell the agent one fixed line instead of each task's problem statement (a control).",
)  # fmt: skip
@click.option("--sampling", "sampling", multiple=True, metavar="KEY=VALUE", help="e.g. temperature=0.7.")
@click.option(
    "--limit", "limits", multiple=True, metavar="KEY=VALUE", help="Rollout limit (e.g. wall_clock_s=600)."
)
@teacher_options
@click.option("--name", default="")
@click.option(
    "--timeout", "timeout_s", type=float, default=None, help="Give up waiting after this many seconds."
)
@click.option("--api", "api_url", envvar="HARNESSRL_API_URL", default=None, help="API base URL.")
@click.option("--json", "as_json", is_flag=True, help="Print the eval's JSON document (one object).")
@click.pass_context
def eval_command(
    ctx: click.Context, dataset: str | None, split: str | None, tasks_file: Path | None,
    instance_ids: tuple[str, ...], harness: str | None,
    harness_command: str | None, harness_options: tuple[str, ...], samples: int, run_id: str | None,
    version: int | None, model_dir: str | None, seed: int | None, withhold_issue: bool, sampling: tuple[str, ...],
    limits: tuple[str, ...], teacher: str | None, teacher_model: str | None, teacher_key_env: str | None,
    name: str, timeout_s: float | None, api_url: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Evaluate a policy (the base model, a run's version, or a model directory) on tasks: pass@1 and pass@k.
    ``harnessrl eval compare EVAL_A EVAL_B``: the paired change between two evals."""
    if ctx.invoked_subcommand is not None:
        given = [
            p.opts[0]
            for p in ctx.command.params
            if ctx.get_parameter_source(p.name or "")  # fmt: skip
            not in (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.ENVIRONMENT)
        ]
        if given:
            fail(f"{given[0]}: an option of evaluating, not of 'eval {ctx.invoked_subcommand}'")
        return
    if harness is None:
        fail("--harness: name the harness to evaluate with")
    if harness not in HARNESS_NAMES:
        fail(f"--harness: unknown harness {harness!r} (one of {', '.join(HARNESS_NAMES)})")
    if dataset is None and tasks_file is None:
        fail("--dataset or --tasks-file: name the tasks to evaluate on")
    if model_dir is not None and (run_id is not None or version is not None):
        fail("--model-dir: give either --model-dir or --run/--version, not both")
    if version is not None and run_id is None and version != 0:
        fail("--version: a version above 0 needs --run (the run that published it)")
    try:
        teacher_config = teacher_section(teacher, teacher_model, teacher_key_env)
    except click.BadParameter as exc:
        fail(f"--teacher: {exc.message}")
    options = _key_values(harness_options, "--harness-option")
    if harness_command is not None:
        options["command"] = harness_command
    settings = load_settings()
    body: dict[str, Any] = {
        "name": name, "harness": {"name": harness, **options}, "samples": samples,
        "sampling": _key_values(sampling, "--sampling"), "limits": _key_values(limits, "--limit"),
    }  # fmt: skip
    for key, value in (("dataset", dataset), ("split", split), ("run_id", run_id), ("version", version),
                       ("model_dir", model_dir), ("seed", seed)):  # fmt: skip
        if value is not None:
            body[key] = value
    if instance_ids:
        body["instance_ids"] = list(instance_ids)
    if withhold_issue:
        body["issue"] = "withheld"
    if teacher_config is not None:
        body["teacher"] = teacher_config
    if tasks_file is not None:
        if split is not None:
            fail("--split: selects from a bundled --dataset only, not from --tasks-file")
        try:
            body["tasks"] = [task.model_dump(mode="json") for task in load_tasks(tasks_file)]
        except TaskError as exc:
            fail(f"--tasks-file: {exc}")
        body.setdefault("dataset", tasks_file.stem)
    client = ApiClient(api_url or default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        try:
            created = client.create_eval(body)
        except ApiClientError as exc:
            fail(
                _as_option(exc) if 400 <= exc.status < 500 else exc.message,
                2 if 400 <= exc.status < 500 else 1,
            )
        detail = wait(client, created["id"], timeout_s, quiet=as_json)
    except ApiClientError as exc:
        fail(exc.message, 1)
    finally:
        client.close()
    click.echo(json.dumps(detail, sort_keys=True) if as_json else figures_text(detail))
    if detail["status"] not in FINISHED:
        fail(f"eval {detail['id']} still {detail['status']} after {timeout_s}s", 3)
    if detail["status"] != "completed":
        sys.exit(1)


def wait(client: ApiClient, eval_id: str, timeout_s: float | None, quiet: bool) -> dict[str, Any]:
    """Poll the eval until it ends (or ``timeout_s``); progress on stderr unless ``quiet``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    shown = None
    while True:
        detail = client.get_eval(eval_id)
        line = f"eval {eval_id}: {detail['status']}, {detail['rollouts_done']}/{detail['rollouts_total']} rollouts done"
        if not quiet and line != shown:
            click.echo(line, err=True)
            shown = line
        if detail["status"] in FINISHED or (deadline is not None and time.monotonic() >= deadline):
            return detail
        time.sleep(2)


@eval_command.command("compare")
@click.argument("eval_a")
@click.argument("eval_b")
@click.option("--api", "api_url", envvar="HARNESSRL_API_URL", default=None, help="API base URL.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compare_command(eval_a: str, eval_b: str, api_url: str | None, as_json: bool) -> None:
    """Δ pass@1 (EVAL_B − EVAL_A) of two evals of the same tasks and seeds, with its paired 95 % interval."""
    settings = load_settings()
    client = ApiClient(api_url or default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        details = [_finished_eval(client, eval_id) for eval_id in (eval_a, eval_b)]
        samples = [sample_outcomes(client.get_eval_samples(eval_id)) for eval_id in (eval_a, eval_b)]
    except ApiClientError as exc:
        fail(exc.message, 2 if exc.status == 404 else 1)
    finally:
        client.close()
    try:
        pairs, dropped = pair_samples(*samples)
        result = compare(pairs, dropped)
    except NotComparable as exc:
        fail(f"{eval_a} and {eval_b} are not comparable: {exc}")
    if as_json:
        click.echo(json.dumps({"eval_a": eval_a, "eval_b": eval_b, **result.as_dict()}, sort_keys=True))
        return
    click.echo(comparison_text(details[0], details[1], result))


@eval_command.command("rates")
@click.argument("eval_id")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
    help="The solve-rates file to write; an existing one is extended with this eval's tasks (same dataset, "
    "harness, policy, samples per task and sampling).",
)  # fmt: skip
@click.option("--api", "api_url", envvar="HARNESSRL_API_URL", default=None, help="API base URL.")
def rates_command(eval_id: str, out: Path, api_url: str | None) -> None:
    """Write each task's solve rate in a completed eval (passed / samples) to a solve-rates file
    (``shared/solve_rates.py``), e.g. the base model's on a split, for ``bench learning --curriculum``."""
    from shared.solve_rates import SolveRates, SolveRatesError, from_eval

    settings = load_settings()
    client = ApiClient(api_url or default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        detail = _finished_eval(client, eval_id)
        rates = from_eval(
            detail, client.get_eval_samples(eval_id), client.get_run(eval_id)["config"]["sampling"]
        )
    except ApiClientError as exc:
        fail(exc.message, 2 if exc.status == 404 else 1)
    except SolveRatesError as exc:
        fail(str(exc))
    finally:
        client.close()
    try:
        if out.exists():
            rates = SolveRates.read(out).merged(rates)
    except SolveRatesError as exc:
        fail(f"{out}: {exc}")
    rates.write(out)
    passed, samples = rates.pass_at_1(list(rates.tasks))
    click.echo(
        f"{out}: {len(rates.tasks)} tasks, pass@1 {passed}/{samples} ({passed / samples:.1%}) over all its evals"
    )


def _finished_eval(client: ApiClient, eval_id: str) -> dict[str, Any]:
    detail = client.get_eval(eval_id)
    if detail["status"] != "completed":
        fail(f"eval {eval_id} is {detail['status']}: only a completed eval can be compared or counted")
    return detail


def sample_outcomes(document: dict[str, Any]) -> list[SampleOutcome]:
    """``GET /v1/evals/{id}/samples`` as ``shared.paired_stats`` reads it."""
    return [
        SampleOutcome(task=s["instance_id"], index=s["index"], seed=s["sampling_seed"], passed=s["passed"])
        for s in document["samples"]
    ]


def comparison_text(a: dict[str, Any], b: dict[str, Any], result: PairedComparison) -> str:
    lo, hi = result.interval_95
    verdict = "within noise: the interval includes 0" if result.within_noise else "the interval excludes 0"
    return "\n".join([
        f"A: eval {a['id']}, policy {describe_policy(a)}",
        f"B: eval {b['id']}, policy {describe_policy(b)}",
        f"{result.tasks} tasks, {result.pairs} paired samples (same task, sample and seed)"
        + (f", {result.dropped} left out (a side never graded)" if result.dropped else ""),
        f"pass@1 A {result.pass_at_1_a:.1%} → B {result.pass_at_1_b:.1%}",
        f"Δ pass@1 {100 * result.delta:+.1f} points (paired 95% CI {100 * lo:+.1f} to {100 * hi:+.1f}, per-task "
        f"cluster bootstrap) — {verdict}",
        f"McNemar exact p = {result.mcnemar_p:.3g} ({result.b_only} samples only B passed, {result.a_only} only A)",
    ])  # fmt: skip
