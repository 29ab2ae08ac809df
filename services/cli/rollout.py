"""``harnessrl rollout show ID``: one rollout's task, reward, per-test outcomes, chains, calls and links."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from services.cli.run import _print_json, api_client, api_option, json_option
from services.cli.tables import Col, Listing


def _outcome_text(detail: dict[str, Any]) -> str:
    """What happened (shared/statuses.py), its short cause and the message, e.g. ``limit (limit:wall_clock): ...``."""
    outcome = detail.get("outcome")
    if outcome is None:
        return f"- (not over: {detail['status']})" + (
            f"; last error: {detail['error']}" if detail["error"] else ""
        )
    text = outcome + (f" ({detail['outcome_reason']})" if detail.get("outcome_reason") else "")
    return text + (f": {detail['error']}" if detail["error"] else "")


def _reward_text(reward: dict[str, Any] | None) -> str:
    """The number with how it was computed, never a word that reads like the outcome (the reward function
    ``resolved`` gives 0.0 to an unresolved rollout)."""
    if reward is None:
        return "- (not graded)"
    return f"{reward['reward']} by reward function {reward['reward_fn']!r} (grading: {reward['outcome']})"


@click.group()
def rollout() -> None:
    """Inspect rollouts (through the REST API)."""


@rollout.command("show")
@click.argument("rollout_id")
@click.option("--patch", "show_patch", is_flag=True, help="Print the patch too.")
@api_option
@json_option
def show(rollout_id: str, show_patch: bool, api_url: str | None, as_json: bool) -> None:
    """Task, status, reward and tests, chains and forks, every call with its latency, log links."""
    with api_client(api_url) as client:
        detail = client.get_rollout(rollout_id)
    if as_json:
        _print_json(detail)
        return
    console = Console()
    head = Table(show_header=False, box=None, pad_edge=False)
    reward = detail["reward"]
    head.add_column(no_wrap=True)
    head.add_column(overflow="fold")  # long values wrap, ids stay whole
    for key, value in (
        ("rollout", detail["id"]),
        ("run / step", f"{detail['run_id']} / {detail['step']} (#{detail['index_in_group']} in group)"),
        ("task", f"{detail['task']['dataset']}/{detail['task']['instance_id']}"),
        (
            "harness",
            f"{detail['harness']} ({detail['harness_outcome'] or '-'}, exit {detail['harness_exit_code']})",
        ),
        ("status", f"{detail['status']} (attempt {detail['attempt']})"),
        ("outcome", _outcome_text(detail)),
        ("isolation", detail["isolation"] or "-"),
        ("reward", _reward_text(reward)),
    ):
        head.add_row(Text(key, style="bold"), value)
    console.print(head)
    if reward:
        tests = Listing([Col("list", whole=True, drop=1), Col("test", keep=True), Col("outcome", whole=True, keep=True)],
                        title="tests")  # fmt: skip
        for kind, outcomes in reward["tests"].items():
            for test_id, outcome in outcomes.items() if isinstance(outcomes, dict) else []:
                tests.add_row(kind, test_id, outcome)
        tests.render(console)
    # In a narrow terminal the columns to the right go first; chain, position, finish reason and version stay.
    headers = ("chain", "pos", "fork", "api", "prompt", "new", "sampled", "finish", "tools", "version", "ms")
    calls = Listing([Col(h, whole=True, keep=h in ("chain", "pos", "finish", "version"), drop=i) for i, h in enumerate(headers)],
                    title=f"{len(detail['calls'])} calls in {len(detail['chains'])} chains")  # fmt: skip
    for call in detail["calls"]:
        calls.add_row(
            str(call["chain_id"]), str(call["position"]), call["fork_reason"] or "", call["provider_api"],
            str(call["prompt_tokens"]), str(call["suffix_tokens"]), str(call["completion_tokens"]),
            call["finish_reason"], str(call["tool_call_count"]), str(call["policy_version"]), f"{call['total_ms']:.0f}",
        )  # fmt: skip
    calls.render(console)
    for link in detail["logs"]:
        console.print(f"log: {link['key']}  {link['url']}", soft_wrap=True)
    if detail["patch"]:
        patch = detail["patch"]
        console.print(f"patch: {patch['key']} ({patch['size_bytes']} bytes)  {patch['url']}", soft_wrap=True)
        if show_patch:
            click.echo(patch["text"] + ("\n[... truncated]" if patch["truncated"] else ""))
