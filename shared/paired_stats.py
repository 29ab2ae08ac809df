"""Paired comparison of two evals of the same tasks and sampling seeds: Δ pass@1 (B − A), its paired 95 %
interval and McNemar's exact test. Who uses it: ``harnessrl eval compare`` (``services/cli/eval.py``),
``harnessrl bench learning`` and ``harnessrl demo`` (version 0 against the last version of a training run).

Why paired: the two evals draw the same seed for the same (task, sample index, call), so sample i of task t in A
and in B differ only by the policy. Comparing the two pass rates as if independent wastes that; comparing the
pairs removes the task difficulty both share.

- **Pairs** (``pair_samples``): a sample of A and one of B are a pair when they have the same task and sample
  index and were sampled with the same seed. Two evals whose (task, index) sets or seeds differ are not
  comparable (``NotComparable``). A pair where either side was never graded (an infrastructure failure) is left
  out and counted (``dropped``).
- **Δ pass@1** = (passes of B − passes of A) / pairs.
- **Interval: per-task cluster bootstrap.** The samples of one task are not independent (a task is easy or hard
  for both policies), so the task is the unit that is resampled: draw as many tasks as there are, with
  replacement, keep every paired sample of each drawn task, recompute Δ; the 2.5 and 97.5 percentiles of
  ``resamples`` such Δ are the interval. The generator is seeded (``bootstrap_seed``), so the same pairs give
  the same interval.
- **Pooling seeds** (``compare_pooled``): with several run seeds over the same tasks, a task's cluster holds its
  paired samples from every seed (task × seed × sample index), and tasks are resampled as above: tasks are the
  population the claim is about, and one task's outcomes under different seeds share its difficulty, so they
  move together. The spread that training randomness adds between seeds is reported beside it as the mean ± sd
  of the per-seed Δ (``across_seeds``); with three seeds that sd is itself rough.
- **McNemar exact test** on the discordant pairs: b = pairs A failed and B passed, c = pairs A passed and B
  failed; under "no difference" b ~ Binomial(b + c, 1/2), two-sided p = min(1, 2 P(X ≤ min(b, c))). It treats
  pairs as independent, so with clustered samples it is a little optimistic; the bootstrap interval is the one
  to read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import mean, stdev
from typing import Any

import numpy as np

RESAMPLES = 10_000
BOOTSTRAP_SEED = 0

Pair = tuple[bool, bool]
"""(A passed, B passed) for one paired sample."""


class NotComparable(ValueError):
    """Two evals that are not of the same tasks, sample indices and seeds."""


@dataclass(frozen=True, kw_only=True)
class SampleOutcome:
    """One sample of an eval: its task, its index among the task's samples, its sampling seed (None when the
    eval was unseeded) and whether it passed (None when it was never graded)."""

    task: str
    index: int
    seed: int | None
    passed: bool | None


def pair_samples(a: Iterable[SampleOutcome], b: Iterable[SampleOutcome]) -> tuple[dict[str, list[Pair]], int]:
    """The paired outcomes per task, and how many pairs were left out because a side was never graded.
    Raises ``NotComparable`` naming the first mismatch."""
    by_key_a = {(s.task, s.index): s for s in a}
    by_key_b = {(s.task, s.index): s for s in b}
    if not by_key_a:
        raise NotComparable("the first eval has no samples")
    only_a, only_b = sorted(by_key_a.keys() - by_key_b.keys()), sorted(by_key_b.keys() - by_key_a.keys())
    if only_a or only_b:
        task, index = (only_a or only_b)[0]
        side = "first" if only_a else "second"
        raise NotComparable(
            f"different samples: task {task} sample {index} is only in the {side} eval "
            f"({len(only_a)} samples only in the first, {len(only_b)} only in the second)"
        )
    pairs: dict[str, list[Pair]] = {}
    dropped = 0
    for key in sorted(by_key_a):
        sa, sb = by_key_a[key], by_key_b[key]
        if sa.seed is None or sa.seed != sb.seed:
            raise NotComparable(
                f"task {key[0]} sample {key[1]} was sampled with seed {sa.seed} in the first eval and {sb.seed} "
                "in the second: pairs need the same seeded draw (evals with the same --seed)"
            )
        if sa.passed is None or sb.passed is None:
            dropped += 1
            continue
        pairs.setdefault(key[0], []).append((sa.passed, sb.passed))
    return pairs, dropped


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (b: A failed, B passed; c: the reverse)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def cluster_bootstrap_interval(
    clusters: Sequence[Sequence[Pair]], resamples: int = RESAMPLES, bootstrap_seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """95 % percentile interval of Δ pass@1 resampling whole clusters (tasks) with replacement."""
    if not clusters:
        raise ValueError("no clusters to resample")
    diff = np.array([sum(int(pb) - int(pa) for pa, pb in c) for c in clusters], dtype=float)
    size = np.array([len(c) for c in clusters], dtype=float)
    rng = np.random.default_rng(bootstrap_seed)
    draws = rng.integers(0, len(clusters), size=(resamples, len(clusters)))
    deltas = diff[draws].sum(axis=1) / size[draws].sum(axis=1)
    low, high = np.percentile(deltas, [2.5, 97.5])
    return (float(low), float(high))


@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    tasks: int
    pairs: int
    dropped: int
    """Pairs left out because one side was never graded."""
    pass_at_1_a: float
    pass_at_1_b: float
    delta: float
    """pass@1 of B − pass@1 of A, a fraction (× 100 for points)."""
    interval_95: tuple[float, float]
    """Per-task cluster bootstrap interval of ``delta``."""
    b_only: int
    """Pairs B passed and A failed."""
    a_only: int
    """Pairs A passed and B failed."""
    mcnemar_p: float

    @property
    def within_noise(self) -> bool:
        """The interval includes 0: this comparison cannot tell the two apart."""
        return self.interval_95[0] <= 0.0 <= self.interval_95[1]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"interval_95": list(self.interval_95), "within_noise": self.within_noise}


def compare(
    pairs_by_task: Mapping[str, Sequence[Pair]], dropped: int = 0, resamples: int = RESAMPLES,
    bootstrap_seed: int = BOOTSTRAP_SEED,
) -> PairedComparison:  # fmt: skip
    """Δ pass@1, its cluster-bootstrap interval and McNemar's p from paired outcomes per task (cluster)."""
    clusters = [list(p) for _, p in sorted(pairs_by_task.items()) if p]
    flat = [pair for c in clusters for pair in c]
    if not flat:
        raise NotComparable("no pair where both samples were graded")
    passed_a = sum(pa for pa, _ in flat)
    passed_b = sum(pb for _, pb in flat)
    b_only = sum(1 for pa, pb in flat if pb and not pa)
    a_only = sum(1 for pa, pb in flat if pa and not pb)
    return PairedComparison(
        tasks=len(clusters), pairs=len(flat), dropped=dropped, pass_at_1_a=passed_a / len(flat),
        pass_at_1_b=passed_b / len(flat), delta=(passed_b - passed_a) / len(flat),
        interval_95=cluster_bootstrap_interval(clusters, resamples, bootstrap_seed), b_only=b_only,
        a_only=a_only, mcnemar_p=mcnemar_exact(b_only, a_only),
    )  # fmt: skip


def compare_pooled(
    per_seed: Sequence[Mapping[str, Sequence[Pair]]], dropped: int = 0, resamples: int = RESAMPLES,
    bootstrap_seed: int = BOOTSTRAP_SEED,
) -> PairedComparison:  # fmt: skip
    """The comparison pooled over seeds: one cluster per task holding its pairs from every seed (module
    docstring, "Pooling seeds")."""
    pooled: dict[str, list[Pair]] = {}
    for pairs_by_task in per_seed:
        for task, pairs in pairs_by_task.items():
            pooled.setdefault(task, []).extend(pairs)
    return compare(pooled, dropped, resamples, bootstrap_seed)


@dataclass(frozen=True, kw_only=True)
class AcrossSeeds:
    seeds: int
    mean: float
    sd: float | None
    """Sample standard deviation (n − 1); None with one seed."""


def across_seeds(deltas: Sequence[float]) -> AcrossSeeds:
    """Mean ± sd of per-seed Δ: the spread training randomness adds (module docstring)."""
    if not deltas:
        raise ValueError("no seeds")
    return AcrossSeeds(seeds=len(deltas), mean=mean(deltas), sd=stdev(deltas) if len(deltas) > 1 else None)
