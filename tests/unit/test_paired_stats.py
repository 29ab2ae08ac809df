"""Paired Δ pass@1 between two evals (``shared/paired_stats.py``) on data small enough to check by hand."""

from __future__ import annotations

import pytest

from shared.paired_stats import (
    NotComparable,
    SampleOutcome,
    across_seeds,
    compare,
    compare_pooled,
    mcnemar_exact,
    pair_samples,
)

pytestmark = pytest.mark.unit

FF, FT, TF, TT = (False, False), (False, True), (True, False), (True, True)


def test_mcnemar_exact_p_values() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 2 * P(X <= 0), X ~ Bin(6, 1/2)
    assert mcnemar_exact(9, 1) == pytest.approx(2 * 11 / 1024)  # 2 * (1 + 10) / 2^10
    assert mcnemar_exact(1, 9) == mcnemar_exact(9, 1)
    assert mcnemar_exact(3, 3) == 1.0  # 2 * P(X <= 3) > 1 is capped


def test_a_clear_gain_on_every_task_excludes_zero() -> None:
    result = compare({f"t{i}": [FT, FT, TT, FF] for i in range(12)})
    assert result.delta == pytest.approx(0.5)
    assert (result.pass_at_1_a, result.pass_at_1_b) == (pytest.approx(0.25), pytest.approx(0.75))
    assert (result.b_only, result.a_only, result.pairs, result.tasks) == (24, 0, 48, 12)
    assert result.interval_95 == (pytest.approx(0.5), pytest.approx(0.5))  # every task moves the same
    assert not result.within_noise
    assert result.mcnemar_p < 1e-6


def test_a_gain_from_one_task_is_within_noise_though_mcnemar_calls_it() -> None:
    # All 10 discordant pairs belong to one task of ten: McNemar (pairs as independent) says p ~ 0.002, but
    # resampling tasks leaves that task out about a third of the time, so the interval reaches 0.
    pairs = {"hard": [FT] * 10} | {f"easy{i}": [TT] * 10 for i in range(9)}
    result = compare(pairs)
    assert result.delta == pytest.approx(0.1)
    assert result.mcnemar_p == pytest.approx(2 / 1024)
    assert result.interval_95[0] == 0.0
    assert result.within_noise


def test_symmetric_changes_give_an_interval_around_zero_and_the_same_one_every_time() -> None:
    pairs = {f"up{i}": [FT, FF] for i in range(8)} | {f"down{i}": [TF, FF] for i in range(8)}
    result = compare(pairs)
    assert result.delta == 0.0
    # the ups among 16 drawn tasks ~ Binomial(16, 1/2): its 2.5 % quantile, 4, gives Δ = (4 - 12) / 32
    assert result.interval_95 == (pytest.approx(-0.25), pytest.approx(0.25))
    assert result.mcnemar_p == 1.0
    assert compare(pairs).interval_95 == result.interval_95  # seeded bootstrap


def test_pooling_seeds_keeps_each_task_one_cluster() -> None:
    seed0 = {"a": [FT, FT], "b": [FF, FF]}
    seed1 = {"a": [FT, TT], "b": [FF, TF]}
    pooled = compare_pooled([seed0, seed1])
    assert pooled.tasks == 2 and pooled.pairs == 8
    assert pooled.delta == pytest.approx((3 - 1) / 8)
    assert (pooled.b_only, pooled.a_only) == (3, 1)
    stats = across_seeds([compare(seed0).delta, compare(seed1).delta])
    assert stats.mean == pytest.approx((0.5 + 0.0) / 2)
    assert stats.sd == pytest.approx(0.3535533906)
    assert across_seeds([0.1]).sd is None


def _samples(passes: list[bool | None], seed_base: int = 100, task: str = "t") -> list[SampleOutcome]:
    return [SampleOutcome(task=task, index=i, seed=seed_base + i, passed=p) for i, p in enumerate(passes)]


def test_pairs_need_the_same_samples_and_seeds() -> None:
    pairs, dropped = pair_samples(_samples([True, False, None]), _samples([True, True, True]))
    assert pairs == {"t": [TT, FT]} and dropped == 1
    with pytest.raises(NotComparable, match="only in the first"):
        pair_samples(_samples([True, False]), _samples([True]))
    with pytest.raises(NotComparable, match="only in the second"):
        pair_samples(_samples([True]), _samples([True]) + _samples([True], task="u"))
    with pytest.raises(NotComparable, match="seed"):
        pair_samples(_samples([True]), _samples([True], seed_base=7))
    unseeded = [SampleOutcome(task="t", index=0, seed=None, passed=True)]
    with pytest.raises(NotComparable, match="seed None"):
        pair_samples(unseeded, unseeded)
