"""An eval's figures (``shared/eval_stats.py``) and a seeded run's seeds (``shared/sampling_seed.py``)."""

from __future__ import annotations

import math

import pytest

from shared.eval_stats import eval_figures, pass_at_k, wilson_interval
from shared.sampling_seed import call_seed, rollout_seed

pytestmark = pytest.mark.unit


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(3, 0, 1) == 0.0
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 3) == 1.0  # with k = n: solved at least once
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_eval_figures_from_per_task_counts() -> None:
    figures = eval_figures([(3, 2), (3, 0), (3, 3), (0, 0)], k=3)  # a task with nothing graded is left out
    assert (figures.tasks, figures.samples, figures.passed) == (3, 9, 5)
    assert figures.pass_at_1 == pytest.approx(5 / 9)
    assert figures.pass_at_1_interval == wilson_interval(5, 9)
    assert figures.pass_at_k == pytest.approx(2 / 3)
    assert figures.pass_at_k_interval == wilson_interval(2, 3)
    short = eval_figures([(2, 0), (3, 1)], k=3)  # one sample of the first task was never graded
    assert short.pass_at_k == pytest.approx((0.0 + 1.0) / 2)


def test_seeds_depend_on_every_name_and_nothing_else() -> None:
    base = rollout_seed(7, "textkit-1", 0, 1)
    assert base == rollout_seed(7, "textkit-1", 0, 1)
    assert len({base, rollout_seed(8, "textkit-1", 0, 1), rollout_seed(7, "textkit-2", 0, 1),
                rollout_seed(7, "textkit-1", 1, 1), rollout_seed(7, "textkit-1", 0, 0)}) == 5  # fmt: skip
    calls = [call_seed(base, n) for n in range(4)]
    assert len(set(calls)) == 4 and all(0 <= s < 2**31 for s in [base, *calls])
