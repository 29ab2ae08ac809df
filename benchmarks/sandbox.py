"""``harnessrl bench sandbox``: what the sandbox costs, measured side by side with the same work unsandboxed.

Figures (medians over ``--repeat`` runs, all in one process on this machine):
- start overhead: ``true`` and ``python -c pass`` run plainly vs in the sandbox (setpriv + bwrap + namespaces);
- a test run: a swe_mini task's pytest suite in a checkout, plainly vs in the sandbox;
- grading: ``grade_patch`` of a swe_mini reference solution end to end (fresh checkout, patches, protected
  paths, sandboxed tests, junit) and the gradings per minute one worker process sustains.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click

from services.grader.grade import grade_patch
from shared.datasets import load_dataset, reference_patch
from shared.machine import describe_machine
from shared.sandbox import Sandbox
from shared.settings import get_settings
from shared.tasks import materialize


def _median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _plain(argv: list[str], cwd: Path, python: str) -> None:
    argv = [python if a == "python" else a for a in argv]
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(repeat: int, instance_id: str = "textkit-1") -> dict[str, object]:
    sandbox = Sandbox(get_settings())
    python = str(sandbox.venv / "bin" / "python")
    task = next(t for t in load_dataset("swe_mini") if t.instance_id == instance_id)
    solution = reference_patch("swe_mini", instance_id).encode()
    limits = sandbox.limits(120)
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="harnessrl-bench-") as tmp:
        os.chmod(tmp, 0o755)
        repo = materialize(task, Path(tmp) / "repo")
        pytest_argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        for name, argv in (
            ("true", ["true"]),
            ("python -c pass", ["python", "-c", "pass"]),
            (f"pytest suite ({instance_id})", pytest_argv),
        ):
            plain = _median_s(lambda a=argv: _plain(a, repo, python), repeat)  # type: ignore[misc]
            boxed = _median_s(lambda a=argv: sandbox.run(a, repo, limits=limits), repeat)  # type: ignore[misc]
            rows[name] = {"plain_ms": plain * 1000, "sandboxed_ms": boxed * 1000, "ratio": boxed / plain}
    grading_s = _median_s(lambda: grade_patch(task, solution, sandbox=sandbox), repeat)
    return {
        "machine": describe_machine(),
        "isolation": sandbox.isolation,
        "repeat": repeat,
        "runs": rows,
        "sandbox_start_overhead_ms": rows["true"]["sandboxed_ms"] - rows["true"]["plain_ms"],
        "grade_patch_s": grading_s,
        "gradings_per_minute_per_worker": 60.0 / grading_s,
    }


@click.command("sandbox")
@click.option("--repeat", type=int, default=5, show_default=True, help="Runs per figure (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def bench_sandbox(repeat: int, as_json: bool) -> None:
    """Sandbox start overhead, a test run plain vs sandboxed, and grading throughput."""
    if repeat < 1:
        raise click.BadParameter("must be at least 1", param_hint="--repeat")
    figures = measure(repeat)
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    click.echo(f"machine: {figures['machine']}\nisolation: {figures['isolation']}\nmedian of {repeat} runs\n")
    click.echo(f"{'command':<28} {'plain ms':>10} {'sandboxed ms':>13} {'ratio':>7}")
    for name, row in figures["runs"].items():  # type: ignore[attr-defined]
        click.echo(f"{name:<28} {row['plain_ms']:>10.1f} {row['sandboxed_ms']:>13.1f} {row['ratio']:>7.2f}")
    click.echo(f"\nsandbox start overhead: {figures['sandbox_start_overhead_ms']:.1f} ms")
    click.echo(
        f"grade_patch (checkout + patches + sandboxed tests + junit): {figures['grade_patch_s']:.2f} s "
        f"-> {figures['gradings_per_minute_per_worker']:.0f} gradings/min per worker process"
    )
