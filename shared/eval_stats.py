"""The figures of an evaluation: pass@1 and pass@k with 95 % intervals, from per-task pass counts.

Who uses it: the api's scheduler when an eval ends (its ``evals`` row), the learning procedure and the CLI.

- **pass@1** is the fraction of graded samples that passed; its interval is the Wilson score interval over the
  samples, treating them as independent (samples of one task are not, so the interval is a little narrow when
  tasks differ a lot in difficulty).
- **pass@k** (k = the samples per task, n) is the mean over tasks of the unbiased estimator
  ``1 - C(n - c, k) / C(n, k)`` (Chen et al., 2021) with c the task's passes; with k = n it is the fraction of
  tasks solved at least once, and its interval is the Wilson interval over the tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


def wilson_interval(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a pass rate (``z`` = 1.96)."""
    if n == 0:
        return (0.0, 1.0)
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``c`` passes among ``n`` samples (k <= n)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class EvalFigures:
    tasks: int
    samples: int
    passed: int
    k: int
    pass_at_1: float
    pass_at_1_interval: tuple[float, float]
    pass_at_k: float
    pass_at_k_interval: tuple[float, float]


def eval_figures(per_task: Iterable[tuple[int, int]], k: int) -> EvalFigures:
    """Figures from (graded samples, passed) per task; k = the samples asked per task. A task with fewer graded
    samples than k (some failed for infrastructure reasons) enters pass@k with its own n as k."""
    counts = [(n, c) for n, c in per_task if n > 0]
    samples = sum(n for n, _ in counts)
    passed = sum(c for _, c in counts)
    at_k = [pass_at_k(n, c, min(k, n)) for n, c in counts]
    solved = sum(1 for _, c in counts if c > 0)
    return EvalFigures(
        tasks=len(counts),
        samples=samples,
        passed=passed,
        k=k,
        pass_at_1=passed / samples if samples else 0.0,
        pass_at_1_interval=wilson_interval(passed, samples),
        pass_at_k=sum(at_k) / len(at_k) if at_k else 0.0,
        pass_at_k_interval=wilson_interval(solved, len(counts)),
    )
