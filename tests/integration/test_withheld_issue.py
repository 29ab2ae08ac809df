"""The withheld-issue control (``RunSpec.issue``): an eval asked with ``issue: withheld`` stores it in its config,
and the runner hands every attempt of such a run one fixed line instead of the task's problem statement; a run
with the default shows the task's own."""

from __future__ import annotations

import pytest

from services.api.evals import _eval_config
from services.api.schemas import EvalCreate
from services.runner.rollout import claim
from shared.run_config import WITHHELD_ISSUE, EvalTarget

pytestmark = pytest.mark.integration


def test_a_withheld_issue_reaches_the_harness_as_one_fixed_line(settings, db, store, toy_task, make_rollouts):  # type: ignore[no-untyped-def]
    body = EvalCreate.model_validate({"harness": "codeblock", "dataset": "swe_mini", "issue": "withheld"})
    config = _eval_config(
        model="policy", harness=body.harness, samples=1, sampling=body.sampling, limits=body.limits,
        reward_fn=body.reward_fn, dataset="swe_mini", task_ids=["t"], target=EvalTarget(source="base"),
        source_run=None, issue=body.issue,
    )  # fmt: skip
    assert config.issue == "withheld"
    _, _, (withheld,) = make_rollouts(toy_task, "codeblock", issue="withheld")
    _, _, (shown,) = make_rollouts(toy_task, "codeblock")
    attempt = claim(settings, db, store, withheld)
    assert attempt is not None and attempt.task.problem_statement == WITHHELD_ISSUE
    assert attempt.task.FAIL_TO_PASS == toy_task.FAIL_TO_PASS  # only the instruction changes
    other = claim(settings, db, store, shown)
    assert other is not None and other.task.problem_statement == toy_task.problem_statement != WITHHELD_ISSUE
