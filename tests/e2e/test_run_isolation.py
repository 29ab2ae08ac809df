"""Two runs on one running ``harnessrl up`` (issue 15, run isolation): the inference pool serves one full-weight
policy at a time, so the second run waits as ``queued`` while the first trains, then the pool is rebased to the
base weights as the second run's version 0 and it trains in turn. Every call of each run carries that run's own
versions (step k's calls carry version k), no group of either run is set aside, and both complete with every
learner step trained.

Real processes throughout (``running_suite``: inference with vLLM and the weight updater, gateway, api with the
scheduler, runner and grader workers, one learner per run), the tiny model, the reference harness.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pytest
from sqlalchemy import select

from shared.db import make_engine
from shared.events import connect
from shared.models import Group, Run
from shared.pool import get_served
from tests.e2e.test_suite import follow, policy_advance_problems, run_accounting_problems

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STEPS, GROUP_SIZE = 2, 2


def run_body(name: str, settings: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": settings.served_model_name,
        "harness": "reference",
        "dataset": "swe_mini",
        "instance_ids": ["textkit-1"],
        "groups_per_step": 1,
        "group_size": GROUP_SIZE,
        "steps": STEPS,
        "grpo": {"learning_rate": 1e-4},
        "sampling": {"temperature": 1.0, "max_tokens": 128},
    }


# Slow (minutes): two real runs one after the other on the shared suite; one run cannot show that the second
# starts from the base weights and never samples the first one's versions.
def test_two_runs_on_one_suite_train_one_after_the_other_each_on_its_own_versions(suite: Any) -> None:
    from services.api.client import ApiClient, default_api_url

    settings = suite.settings
    engine = make_engine(settings.database_url, pool_size=1)
    client = ApiClient(default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        first = client.create_run(run_body("isolation-a", settings))["id"]
        second = client.create_run(run_body("isolation-b", settings))["id"]

        def status(run_id: str) -> str:
            with engine.connect() as conn:
                return str(conn.execute(select(Run.status).where(Run.id == run_id)).scalar_one())

        statuses_seen: dict[str, set[str]] = {first: set(), second: set()}

        def watch(until: Any) -> Any:
            def check() -> bool:
                for run_id in statuses_seen:
                    statuses_seen[run_id].add(status(run_id))
                return bool(until())

            return check

        follow(suite, watch(lambda: status(first) == "running"), 240, "the first run to start")
        # While the first run trains, the second waits for the pool and has no rollout yet.
        follow(suite, watch(lambda: status(first) in ("completed", "failed")), 900, "the first run to end")
        assert status(first) == "completed", client.get_run(first)
        assert statuses_seen[second] == {"queued"}, statuses_seen
        follow(suite, watch(lambda: status(second) in ("completed", "failed")), 900, "the second run to end")
        assert status(second) == "completed", client.get_run(second)

        problems: list[str] = []
        for run_id in (first, second):
            problems += [f"{run_id}: {p}" for p in run_accounting_problems(engine, run_id, STEPS, GROUP_SIZE)]
            problems += [f"{run_id}: {p}" for p in policy_advance_problems(engine, run_id, STEPS)]
            with engine.connect() as conn:
                set_aside = conn.execute(
                    select(Group.id, Group.error).where(Group.run_id == run_id, Group.status == "failed")
                ).all()
            if set_aside:
                problems.append(f"{run_id}: groups set aside: {set_aside}")
        assert not problems, "\n".join(problems)

        with closing(connect(settings.redis_url)) as r:
            served = get_served(r)
        assert served is not None and (served.run_id, served.version) == (second, STEPS), served
    finally:
        for run in client.list_runs()["items"]:  # a failed assertion leaves no run behind for the next test
            if run["status"] in ("queued", "running"):
                client.stop_run(run["id"])
        engine.dispose()
