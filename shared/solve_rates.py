"""Solve rates: per task, how many of an eval's samples passed — the one format for recorded solve rates.

A solve-rates file records what one policy (usually the base model, version 0) solves on a dataset's tasks with one
harness and sampling, measured by evals (``harnessrl eval rates EVAL_ID --out FILE`` writes or extends one). The
learning recipe reads it for a curriculum (train only on tasks the base model solves sometimes but not always:
every GRPO group of such a task is likely to hold both rewards), and ``docs/perf/learning.md`` quotes each split's
base pass@1 from it. The bundled one is ``shared/datasets/<dataset>/base_solve_rates.json``.

JSON: ``{"dataset", "harness", "policy", "samples_per_task", "sampling", "evals": [{"id", "split", "seed", "passed",
"samples", "finished_at"}], "tasks": {instance_id: [passed, samples]}}``. Several evals of the same dataset,
harness, policy, samples per task and sampling merge into one file (each task measured once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class SolveRatesError(ValueError):
    """A solve-rates file that cannot be read, or evals that cannot be merged into one."""


@dataclass(frozen=True)
class SolveRates:
    dataset: str
    harness: str
    policy: str
    """What was evaluated: ``base`` (version 0), or ``RUN@VERSION``."""
    samples_per_task: int
    sampling: dict[str, Any]
    """The eval's sampling (``temperature``, ``top_p``, ``max_tokens``): rates under other sampling differ."""
    tasks: dict[str, tuple[int, int]]
    """instance id -> (passed, samples)."""
    evals: list[dict[str, Any]] = field(default_factory=list)

    def rate(self, instance_id: str) -> float | None:
        passed, samples = self.tasks.get(instance_id, (0, 0))
        return passed / samples if samples else None

    def in_band(self, instance_ids: list[str], low: float, high: float) -> list[str]:
        """The tasks of ``instance_ids`` (in their order) whose solve rate lies in [low, high]; every id must have
        a rate."""
        missing = [t for t in instance_ids if self.rate(t) is None]
        if missing:
            raise SolveRatesError(
                f"no solve rate for {len(missing)} of {len(instance_ids)} tasks (first: {missing[0]}); measure "
                "them with `harnessrl eval --split SPLIT --samples 8` and `harnessrl eval rates EVAL --out FILE`"
            )
        return [t for t in instance_ids if low <= (self.rate(t) or 0.0) <= high]

    def pass_at_1(self, instance_ids: list[str]) -> tuple[int, int]:
        """(passed, samples) over ``instance_ids`` (those with a rate)."""
        pairs = [self.tasks[t] for t in instance_ids if t in self.tasks]
        return sum(p for p, _ in pairs), sum(n for _, n in pairs)

    def merged(self, other: SolveRates) -> SolveRates:
        """This file's tasks and ``other``'s; refuses a different dataset, harness, policy or sample count, and a
        task measured in both."""
        for name in ("dataset", "harness", "policy", "samples_per_task", "sampling"):
            if getattr(self, name) != getattr(other, name):
                raise SolveRatesError(
                    f"cannot merge solve rates of {name} {getattr(other, name)!r} into {getattr(self, name)!r}"
                )
        both = sorted(self.tasks.keys() & other.tasks.keys())
        if both:
            raise SolveRatesError(f"{len(both)} tasks are measured twice (first: {both[0]})")
        return SolveRates(
            self.dataset, self.harness, self.policy, self.samples_per_task, self.sampling,
            {**self.tasks, **other.tasks},
            [*self.evals, *other.evals],
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset, "harness": self.harness, "policy": self.policy,
            "samples_per_task": self.samples_per_task, "sampling": self.sampling, "evals": self.evals,
            "tasks": {t: list(self.tasks[t]) for t in sorted(self.tasks)},
        }  # fmt: skip

    def write(self, path: Path) -> None:
        """The document with one line per task (so a re-measured task is one line of a diff)."""
        head = {k: v for k, v in self.as_json().items() if k != "tasks"}
        lines = [f"  {json.dumps(t)}: {json.dumps(list(self.tasks[t]))}" for t in sorted(self.tasks)]
        body = json.dumps(head, indent=1)[:-2] + ',\n "tasks": {\n' + ",\n".join(lines) + "\n }\n}\n"
        path.write_text(body)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SolveRates:
        try:
            tasks = {str(t): (int(p), int(n)) for t, (p, n) in data["tasks"].items()}
            rates = cls(
                str(data["dataset"]), str(data["harness"]), str(data["policy"]), int(data["samples_per_task"]),
                dict(data["sampling"]), tasks, list(data.get("evals", [])),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise SolveRatesError(f"not a solve-rates document: {exc!r}") from None
        bad = [t for t, (p, n) in tasks.items() if not 0 <= p <= n or n <= 0]
        if bad:
            raise SolveRatesError(f"task {bad[0]}: passed must lie in 0..samples and samples be positive")
        return rates

    @classmethod
    def read(cls, path: Path) -> SolveRates:
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SolveRatesError(str(exc)) from None
        return cls.from_json(data)


def from_eval(detail: dict[str, Any], samples: dict[str, Any], sampling: dict[str, Any]) -> SolveRates:
    """Solve rates from a completed eval: ``GET /v1/evals/{id}`` (``detail``), its ``/samples`` and its run
    config's ``sampling`` (``GET /v1/runs/{id}``; the per-call seed is left out). Every sample
    must have been graded (a sample that never was cannot count as solved or unsolved)."""
    if detail.get("status") != "completed":
        raise SolveRatesError(
            f"eval {detail.get('id')} is {detail.get('status')}: solve rates need a completed eval"
        )
    tasks: dict[str, list[int]] = {}
    for s in samples["samples"]:
        if s["passed"] is None:
            raise SolveRatesError(
                f"eval {detail['id']}: task {s['instance_id']} sample {s['index']} was not graded"
            )
        counts = tasks.setdefault(s["instance_id"], [0, 0])
        counts[0] += bool(s["passed"])
        counts[1] += 1
    if not tasks:
        raise SolveRatesError(f"eval {detail['id']} has no samples")
    policy = (
        "base" if detail["source"] == "base" else f"{detail.get('source_run_id')}@{detail.get('version')}"
    )
    if detail["source"] == "model_dir":
        policy = f"model_dir:{detail.get('model_dir')}"
    result = detail.get("result") or {}
    return SolveRates(
        dataset=detail["dataset"], harness=detail["harness"], policy=policy,
        samples_per_task=int(detail["samples_per_task"]),
        sampling={k: sampling.get(k) for k in ("temperature", "top_p", "max_tokens")}, tasks={t: (p, n) for t, (p, n) in tasks.items()},
        evals=[{"id": detail["id"], "split": detail.get("split"), "seed": detail.get("seed"),
                "passed": result.get("passed"), "samples": result.get("samples"),
                "finished_at": detail.get("finished_at")}],
    )  # fmt: skip
