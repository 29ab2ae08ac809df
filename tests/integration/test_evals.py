"""Evals on real Postgres and Redis, with the rows the runner, grader and learner would write (the services
themselves run in ``tests/e2e/test_eval.py``): an eval takes the inference pool like a run (FIFO, rebase request,
starts once the pool serves its target), finishes with pass@1 / pass@k and their intervals in its ``evals`` row
and TensorBoard; a training run's ``config.eval`` evaluates version 0 before step 0 and the trained version after
the last step, waits for each, and no eval group ever reaches a groups stream; ``POST /v1/evals`` and
``harnessrl eval`` refuse a bad dataset, split, harness, run, version or model directory, naming it, and write
nothing; ``harnessrl eval compare`` pairs two evals' samples and refuses evals that do not pair."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from services.api import evals, runs, scheduler
from services.api.scheduler import PoolGate
from services.api.schemas import EvalCreate, RunCreate
from services.cli.main import cli
from services.grader.group_completion import complete_group_if_done
from shared import migrate
from shared.db import (
    async_session_factory,
    async_session_scope,
    make_async_engine,
    make_engine,
    session_factory,
    session_scope,
)
from shared.events import connect, groups_stream, rebase_request, weights_channel
from shared.ids import new_id
from shared.models import Eval, Group, Reward, Rollout, Run, Step, Task, Weight
from shared.pool import set_served
from shared.run_config import RunConfig
from shared.sampling_seed import rollout_seed
from shared.settings import Settings
from shared.solve_rates import SolveRates
from shared.tensorboard import ScalarLog, read_scalars, run_logdir
from tests.fixtures import product
from tests.fixtures.product import ApiServer
from tests.fixtures.services import redis_db_for
from tests.fixtures.suite import PG_ADMIN_URL, flushed_redis_db, fresh_database

pytestmark = pytest.mark.integration

api_server = product.api_server
POOL_REDIS_DB = redis_db_for("HARNESSRL_TEST_POOL_REDIS_DB", 13)
TASKS = ["textkit-1", "textkit-2"]


class Env:
    """A database and a Redis db of this test's own, the pool gate, and the scheduler's functions on them."""

    def __init__(self, database_url: str, redis_url: str, data_dir: Path) -> None:
        self.database_url = database_url
        self.engine = make_engine(database_url)
        self.db = session_factory(self.engine)
        self.redis = connect(redis_url)
        self.gate = PoolGate(redis_url, exclusive=True, resend_s=0.0)
        self.settings = Settings(data_dir=data_dir, _env_file=None)  # type: ignore[call-arg]
        self.tensorboard = ScalarLog(self.settings, writer="api")

    def on_async(self, work: Callable[[Any], Any]) -> Any:
        async def go() -> Any:
            engine = make_async_engine(self.database_url)
            try:
                factory = async_session_factory(engine)
                return await work(factory)
            finally:
                await engine.dispose()

        return asyncio.run(go())

    def promote(self) -> list[str]:
        return self.on_async(self.gate.promote)  # type: ignore[no-any-return]

    def advance(self, run_id: str) -> str | None:
        async def work(factory: Any) -> str | None:
            async with async_session_scope(factory) as session:
                return await scheduler.advance_run(session, run_id, self.tensorboard)

        return self.on_async(work)  # type: ignore[no-any-return]

    def create(self, make: Callable[[Any], Any]) -> str:
        async def work(factory: Any) -> str:
            async with async_session_scope(factory) as session:
                return str((await make(session)).id)

        return self.on_async(work)  # type: ignore[no-any-return]

    def run(self, run_id: str) -> Run:
        with session_scope(self.db) as session:
            run = session.get(Run, run_id)
            assert run is not None
            session.expunge(run)
            return run

    def grade_all(self, run_id: str, passed: Callable[[Rollout], bool]) -> None:
        """What the runner and grader do to each rollout of ``run_id``: graded, with a reward; groups completed."""
        with session_scope(self.db) as session:
            for rollout in session.scalars(select(Rollout).where(Rollout.run_id == run_id)):
                ok = passed(rollout)
                rollout.status, rollout.outcome = "graded", "resolved" if ok else "unresolved"
                session.add(Reward(rollout_id=rollout.id, reward=float(ok), resolved=ok))
            group_ids = session.scalars(select(Group.id).where(Group.run_id == run_id)).all()
        for group_id in group_ids:
            complete_group_if_done(self.db, self.redis, group_id)

    def learner_step(self, run_id: str, step: int) -> None:
        """What the learner commits for sampling step ``step`` (and the updater once it serves the version)."""
        with session_scope(self.db) as session:
            run = session.get(Run, run_id)
            assert run is not None
            run.policy_version = step + 1
            session.add(Step(run_id=run_id, step=step + 1, policy_version=step + 1, metrics={}))
            session.add(Weight(run_id=run_id, version=step + 1, object_key=f"weights/{run_id}/{step + 1}/m.safetensors", status="served"))  # fmt: skip
            for group in session.scalars(select(Group).where(Group.run_id == run_id, Group.step == step)):
                group.status, group.consumed_at = "consumed", datetime.now(UTC)

    def close(self) -> None:
        self.gate.close()
        self.tensorboard.close()
        self.redis.close()
        self.engine.dispose()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with fresh_database() as url, flushed_redis_db(POOL_REDIS_DB) as redis_url:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
        migrate.upgrade(url)
        e = Env(url, redis_url, tmp_path)
        yield e
        e.close()


def _eval_body(**fields: Any) -> EvalCreate:
    return EvalCreate.model_validate(
        {"harness": "codeblock", "dataset": "swe_mini", "instance_ids": TASKS, **fields}
    )


def test_an_eval_takes_the_pool_in_turn_and_ends_with_its_figures(env: Env) -> None:
    set_served(env.redis, "", 0)
    body = _eval_body(samples=3, seed=11)
    eval_id = env.create(lambda s: evals.create_eval(s, body, "policy"))
    later = env.create(lambda s: evals.create_eval(s, _eval_body(samples=1), "policy"))
    pubsub = env.redis.pubsub()
    pubsub.subscribe(weights_channel(env.redis))
    pubsub.get_message(timeout=1)

    env.promote()  # first in line: the updater is asked to serve it
    message = pubsub.get_message(timeout=2)
    assert message is not None and rebase_request(json.loads(message["data"])) == eval_id
    assert env.run(eval_id).status == "queued"
    set_served(env.redis, eval_id, 0)  # the updater serves the base weights under the eval's name
    env.promote()
    env.promote()  # the second eval waits for the first
    assert (env.run(eval_id).status, env.run(later).status) == ("running", "queued")

    with session_scope(env.db) as session:
        rollouts = session.scalars(select(Rollout).where(Rollout.run_id == eval_id)).all()
        instance = {t: i for t, i in session.execute(select(Task.id, Task.instance_id))}
        assert len(rollouts) == 6
        # Each rollout's seed is a function of the eval's seed, the task and its index: a second eval draws the same.
        assert {r.sampling_seed for r in rollouts} == {
            rollout_seed(11, instance[r.task_id], 0, r.index_in_group) for r in rollouts
        }
    assert env.advance(eval_id) is None  # rollouts still running

    # textkit-1 passes 2 of 3, textkit-2 none: pass@1 = 2/6, pass@3 = 1/2 (one task solved at least once).
    env.grade_all(eval_id, lambda r: r.index_in_group < 2 and instance[r.task_id] == "textkit-1")
    with session_scope(env.db) as session:  # the grader completed the groups without a stream entry
        groups = session.scalars(select(Group).where(Group.run_id == eval_id)).all()
        assert {(g.status, g.stream_entry_id) for g in groups} == {("complete", None)}
    assert env.redis.xlen(groups_stream(eval_id)) == 0
    assert env.advance(eval_id).startswith("completed: pass@1 0.333")  # type: ignore[union-attr]
    with session_scope(env.db) as session:
        row = session.get(Eval, eval_id)
        assert row is not None
        assert (row.samples, row.passed, row.failed, row.pass_at_1, row.pass_at_k) == (6, 2, 0, 2 / 6, 0.5)
        assert 0 < row.pass_at_1_low < 2 / 6 < row.pass_at_1_high < 1  # type: ignore[operator]
        assert (row.source, row.version, row.seed, row.tasks) == ("base", 0, 11, 2)
    assert env.run(eval_id).status == "completed"
    scalars = read_scalars(run_logdir(env.settings, eval_id))
    assert scalars["eval/pass_at_1"] == [(0, pytest.approx(2 / 6))]
    assert scalars["eval/pass_at_3"] == [(0, 0.5)]

    env.promote()  # the pool is free: the next eval's turn
    message = pubsub.get_message(timeout=2)
    assert message is not None and rebase_request(json.loads(message["data"])) == later
    pubsub.close()


def test_a_training_runs_evals_run_before_step_0_and_after_the_last_step_and_are_never_trained(
    env: Env,
) -> None:
    set_served(env.redis, "", 0)

    async def make_run(session: Any) -> Run:
        body = RunCreate.model_validate({
            "model": "policy", "harness": "codeblock", "dataset": "swe_mini", "instance_ids": TASKS,
            "group_size": 2, "steps": 1, "eval": {"every_steps": 1, "samples": 1},
        })  # fmt: skip
        run, _ = await runs.create_run(session, body, None, queued=True)
        return run

    run_id = env.create(make_run)
    env.promote()
    set_served(env.redis, run_id, 0)
    started = env.promote()
    assert "eval" in started[0] and env.run(run_id).status == "running", started
    with session_scope(env.db) as session:  # the eval of version 0 comes first: no step 0 yet
        assert session.scalar(select(func.count()).select_from(Group).where(Group.run_id == run_id)) == 0
        first_eval = session.scalars(select(Eval).where(Eval.source_run_id == run_id)).one()
        assert (first_eval.at_step, first_eval.version, first_eval.samples_per_task) == (0, 0, 1)
        first = first_eval.run_id
    # A run queued meanwhile waits; the run's own eval starts beside it, ahead of the queue.
    waiting = env.create(lambda s: evals.create_eval(s, _eval_body(), "policy"))
    env.promote()
    assert (env.run(first).status, env.run(waiting).status) == ("running", "queued")
    assert env.advance(run_id) is None  # the run waits for its eval
    env.grade_all(first, lambda r: True)
    assert env.advance(first).startswith("completed")  # type: ignore[union-attr]
    assert env.advance(run_id) == "step 0 created"

    env.grade_all(run_id, lambda r: r.index_in_group == 0)
    env.learner_step(run_id, 0)
    set_served(env.redis, run_id, 1)
    assert "created before step 1" in (env.advance(run_id) or "")  # steps = 1: after the last step
    assert env.run(run_id).status == "running"
    env.promote()
    with session_scope(env.db) as session:
        second = session.scalars(select(Eval).where(Eval.source_run_id == run_id, Eval.at_step == 1)).one()
        assert (second.version, second.source) == (1, "weights")
        second_id = second.run_id
    assert env.run(second_id).status == "running"
    env.grade_all(second_id, lambda r: False)
    env.advance(second_id)
    assert env.advance(run_id) == "completed after step 0"

    with session_scope(env.db) as session:  # no eval group ever reached a groups stream
        eval_groups = session.scalars(
            select(Group).join(Run, Run.id == Group.run_id).where(Run.kind == "eval")
        ).all()
        assert eval_groups and all(g.stream_entry_id is None for g in eval_groups)
    assert env.redis.xlen(groups_stream(run_id)) == 2  # the run's own two groups

    async def detail(factory: Any) -> Any:
        async with async_session_scope(factory) as session:
            return await runs.run_detail(session, run_id)

    curve = env.on_async(detail).eval_curve
    assert [(p.at_step, p.version, p.pass_at_1) for p in curve] == [(0, 0, 1.0), (1, 1, 0.0)]
    scalars = read_scalars(run_logdir(env.settings, run_id))  # the run's own logdir holds its evals' curve
    assert scalars["eval/pass_at_1"] == [(0, 1.0), (1, 0.0)]
    assert scalars["eval/version"] == [(0, 0.0), (1, 1.0)]


def test_an_eval_of_a_version_the_pool_never_served_fails_beside_its_run(env: Env) -> None:
    """A trained version whose weights the updater rejected cannot be evaluated: the eval fails with the reason
    and the run goes on (it would otherwise wait for it forever)."""
    config = RunConfig.model_validate(
        {
            "model": "policy",
            "harness": "codeblock",
            "steps": 3,
            "eval": {"every_steps": 1, "dataset": "swe_mini"},
        }
    )
    with session_scope(env.db) as session:
        session.add(Run.create("run_x", config, status="running", policy_version=2))
    set_served(env.redis, "run_x", 1)  # version 2 was rejected: the pool still serves version 1

    async def schedule(session: Any) -> Run:
        run = await session.get(Run, "run_x")
        assert "created before step 2" in (await evals.due_eval(session, run, config, 2) or "")
        row = (await session.scalars(select(Eval).where(Eval.source_run_id == "run_x"))).one()
        return await session.get(Run, row.run_id)  # type: ignore[no-any-return]

    eval_id = env.create(schedule)
    env.promote()
    run = env.run(eval_id)
    assert run.status == "failed" and "not version 2, which was never served" in (run.error or ""), run.error


# --- the request's checks -----------------------------------------------------------------------------------


def _counts(db: Any) -> tuple[int, int, int]:
    with session_scope(db) as session:
        return tuple(session.scalar(select(func.count()).select_from(t)) for t in (Run, Eval, Task))  # type: ignore[return-value]


BAD_REQUESTS = [
    ({"dataset": "nope"}, "body.dataset", "unknown dataset 'nope'"),
    ({"split": "nope"}, "body.split", "nope"),
    ({"run_id": "run_missing"}, "body.run_id", "no run 'run_missing'"),
    ({"harness": "nope"}, "body.harness", ""),
    ({"model_dir": "/nonexistent/model"}, "body.model_dir", "is not a directory"),
    ({"version": 3}, "body", "needs 'run_id'"),
]


@pytest.mark.parametrize(("change", "loc", "says"), BAD_REQUESTS)
def test_a_bad_eval_request_is_a_422_naming_the_field_and_writes_nothing(
    api_server: ApiServer, db: Any, change: dict[str, Any], loc: str, says: str
) -> None:
    body = {"harness": "codeblock", "dataset": "swe_micro", "split": "eval", "samples": 2, **change}
    before = _counts(db)
    with api_server.client() as client:
        response = client.post("/v1/evals", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"].startswith(loc) and says in detail["msg"], detail
    assert _counts(db) == before


def test_a_version_the_run_never_published_is_refused(api_server: ApiServer, db: Any) -> None:
    with api_server.client() as client:
        run = client.post("/v1/runs", json={"model": "policy", "harness": "codeblock", "dataset": "swe_mini",
                                            "instance_ids": TASKS, "group_size": 1}).json()  # fmt: skip
        before = _counts(db)
        response = client.post("/v1/evals", json={"harness": "codeblock", "dataset": "swe_mini", "run_id": run["id"],
                                                  "version": 4})  # fmt: skip
        client.post(f"/v1/runs/{run['id']}/stop")
    assert response.status_code == 422
    assert response.json()["message"] == (
        f"body.version: version 4 of run {run['id']} was not published; it has only version 0 (base)"
    )
    assert _counts(db) == before


@pytest.fixture
def harnessrl(api_server: ApiServer, settings_env: dict[str, str]):  # type: ignore[no-untyped-def]
    env = {**settings_env, "HARNESSRL_API_URL": api_server.url}

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--dataset", "nope"], "harnessrl: --dataset: unknown dataset 'nope'"),
        (["--split", "nope"], "harnessrl: --split: "),
        (["--harness", "nope"], "harnessrl: --harness: unknown harness 'nope'"),
        (["--run", "run_missing"], "harnessrl: --run: no run 'run_missing'"),
        (["--version", "2"], "harnessrl: --version: a version above 0 needs --run"),
    ],
)
def test_harnessrl_eval_exits_2_with_one_line_and_creates_nothing(
    harnessrl: Any, db: Any, args: list[str], line: str
) -> None:
    base = {"--dataset": "swe_micro", "--split": "eval", "--harness": "codeblock", "--samples": "2"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    before = _counts(db)
    result = harnessrl("eval", *[item for pair in base.items() for item in pair])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(line), result.stderr
    assert result.stdout == ""
    assert _counts(db) == before


def test_an_eval_of_a_lora_version_starts_once_its_adapter_is_served_under_its_name(env: Env) -> None:
    """A LoRA run's version is evaluated through its adapter, loaded as ``<eval>-v<N>``: the eval is a LoRA run for
    the pool (it may share it with LoRA runs) and starts only once the updater serves that adapter to it."""
    from shared.adapters import adapter_key, adapter_name, set_served_adapter

    lora_run = RunConfig.model_validate({"model": "policy", "harness": "codeblock", "lora": {"rank": 4}})
    with session_scope(env.db) as session:
        session.add(Run.create("run_lora", lora_run, status="completed", policy_version=2))
        session.add(Run.create("run_other", lora_run, status="running", created_at=datetime.now(UTC) - timedelta(hours=1)))  # fmt: skip
        session.add(
            Weight(run_id="run_lora", version=2, object_key=adapter_key("run_lora", 2), status="served")
        )
    set_served(env.redis, "run_other", 0)
    eval_id = env.create(lambda s: evals.create_eval(s, _eval_body(run_id="run_lora"), "policy"))
    with session_scope(env.db) as session:
        row = session.get(Eval, eval_id)
        assert row is not None and (row.source, row.version) == ("adapter", 2)
    pubsub = env.redis.pubsub()
    pubsub.subscribe(weights_channel(env.redis))
    pubsub.get_message(timeout=1)
    env.promote()  # beside the running LoRA run, but not before its adapter is served to it
    message = pubsub.get_message(timeout=2)
    assert message is not None and rebase_request(json.loads(message["data"])) == eval_id
    assert env.run(eval_id).status == "queued"
    set_served_adapter(env.redis, eval_id, adapter_name(eval_id, 2))
    env.promote()
    assert env.run(eval_id).status == "running"
    pubsub.close()


def test_harnessrl_eval_sends_a_tasks_file_and_refuses_a_bad_one(
    harnessrl: Any, api_server: ApiServer, db: Any, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n')
    before = _counts(db)
    result = harnessrl("eval", "--tasks-file", str(bad), "--harness", "codeblock")
    assert result.exit_code == 2 and result.stderr.startswith("harnessrl: --tasks-file: "), result.stderr
    assert result.stderr.count("\n") == 1 and _counts(db) == before

    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(product.task_spec(f"own-{i}")) + "\n" for i in range(2)))
    result = harnessrl("eval", "--tasks-file", str(mine), "--harness", "codeblock", "--samples", "2",
                       "--seed", "3", "--timeout", "0", "--json")  # fmt: skip
    assert result.exit_code == 3, (
        result.stdout,
        result.stderr,
    )  # created; still waiting for the pool or workers
    detail = json.loads(result.stdout)
    assert (detail["dataset"], detail["samples_per_task"], detail["seed"], detail["source"]) == (
        "mine",
        2,
        3,
        "base",
    )
    with api_server.client() as client:
        assert client.get(f"/v1/evals/{detail['id']}").json()["id"] == detail["id"]
        client.post(f"/v1/runs/{detail['id']}/stop")


def _finished_eval(db: Any, seed: int | None, passes: dict[str, list[bool | None]]) -> str:
    """An eval as the scheduler, runner and grader leave it: completed, one rollout per (task, sample) with the
    seed the scheduler derives, graded (``None``: never graded)."""
    samples = len(next(iter(passes.values())))
    with session_scope(db) as session:
        task_ids = {}
        for instance_id in passes:
            task = session.scalar(
                select(Task).where(Task.dataset == "swe_mini", Task.instance_id == instance_id)
            )
            if task is None:
                task = Task(id=f"task_{instance_id}_{seed}_{len(passes)}", dataset="swe_mini",
                            instance_id=instance_id, spec=product.task_spec(instance_id))  # fmt: skip
                session.add(task)
                session.flush()
            task_ids[instance_id] = task.id
        config = RunConfig.model_validate({
            "model": "policy", "harness": "codeblock", "group_size": samples, "steps": 1, "dataset": "swe_mini",
            "task_ids": list(task_ids.values()), "sampling": {"seed": seed}, "target": {"source": "base"},
        })  # fmt: skip
        run = Run.create(new_id("eval"), config, status="completed", policy_version=0)
        session.add(run)
        session.flush()
        session.add(Eval(run_id=run.id, version=0, source="base", dataset="swe_mini", harness="codeblock",
                         samples_per_task=samples, seed=seed, tasks=len(passes)))  # fmt: skip
        for instance_id, outcomes in passes.items():
            for index, passed in enumerate(outcomes):
                rollout = Rollout(
                    id=new_id("ro"), run_id=run.id, task_id=task_ids[instance_id], index_in_group=index,
                    harness="codeblock", status="graded" if passed is not None else "failed",
                    sampling_seed=None if seed is None else rollout_seed(seed, instance_id, 0, index),
                )  # fmt: skip
                session.add(rollout)
                session.flush()
                if passed is not None:
                    session.add(Reward(rollout_id=rollout.id, reward=float(passed), resolved=passed))
        return run.id


def test_harnessrl_eval_compare_pairs_two_evals_and_refuses_evals_that_do_not_pair(
    harnessrl: Any, db: Any
) -> None:
    yes, no = True, False
    before = _finished_eval(
        db, 5, {"textkit-1": [no, no, yes], "textkit-2": [no, no, no], "minstats-1": [yes, no, None]}
    )
    after = _finished_eval(db, 5, {"textkit-1": [yes, yes, yes], "textkit-2": [no, yes, no], "minstats-1": [yes, no, yes]})  # fmt: skip
    result = harnessrl("eval", "compare", before, after, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    figures = json.loads(result.stdout)
    # 8 graded pairs (minstats-1's third was never graded in the first): A 2/8, B 5/8, 3 pairs only B passed.
    assert (figures["tasks"], figures["pairs"], figures["dropped"]) == (3, 8, 1)
    assert (figures["pass_at_1_a"], figures["pass_at_1_b"]) == (2 / 8, 5 / 8)
    assert figures["delta"] == pytest.approx(3 / 8)
    assert (figures["b_only"], figures["a_only"]) == (3, 0)
    assert figures["mcnemar_p"] == pytest.approx(2 / 8)
    low, high = figures["interval_95"]
    assert low <= 3 / 8 <= high and figures["within_noise"] == (low <= 0 <= high)

    text_result = harnessrl("eval", "compare", before, after)
    assert text_result.exit_code == 0
    assert "Δ pass@1 +37.5 points (paired 95% CI" in text_result.stdout
    assert "McNemar exact p = 0.25" in text_result.stdout

    other_seed = _finished_eval(db, 6, {"textkit-1": [no, no, yes], "textkit-2": [no, no, no], "minstats-1": [yes, no, no]})  # fmt: skip
    fewer = _finished_eval(db, 5, {"textkit-1": [no, no, yes], "textkit-2": [no, no, no]})
    for other, says in ((other_seed, "seed"), (fewer, "only in the first"), ("eval_missing", "no eval")):
        refused = harnessrl("eval", "compare", before, other)
        assert refused.exit_code == 2, (refused.stdout, refused.stderr)
        assert refused.stderr.startswith("harnessrl: ") and says in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and refused.stdout == ""
    misplaced = harnessrl("eval", "--samples", "3", "compare", before, after)
    assert misplaced.exit_code == 2 and "--samples" in misplaced.stderr


def test_harnessrl_eval_rates_writes_and_extends_a_solve_rates_file(
    harnessrl: Any, db: Any, tmp_path: Any
) -> None:
    yes, no = True, False
    first = _finished_eval(db, 7, {"textkit-1": [no, no, yes], "textkit-2": [no, no, no]})
    second = _finished_eval(db, 8, {"minstats-1": [yes, yes, no]})
    out = tmp_path / "rates.json"
    assert harnessrl("eval", "rates", first, "--out", str(out)).exit_code == 0
    written = harnessrl("eval", "rates", second, "--out", str(out))
    assert written.exit_code == 0, written.stderr
    assert "3 tasks, pass@1 3/9" in written.stdout
    rates = SolveRates.read(out)
    assert rates.tasks == {"textkit-1": (1, 3), "textkit-2": (0, 3), "minstats-1": (2, 3)}
    assert (rates.policy, rates.samples_per_task, rates.harness) == ("base", 3, "codeblock")
    assert [e["id"] for e in rates.evals] == [first, second]
    assert rates.in_band(["textkit-1", "textkit-2", "minstats-1"], 0.1, 0.5) == ["textkit-1"]

    # Refused, and the file is left as it was: a task measured twice, a sample never graded, a missing eval.
    before = out.read_text()
    again = _finished_eval(db, 9, {"textkit-1": [yes, yes, yes]})
    ungraded = _finished_eval(db, 10, {"minstats-1": [yes, None, no]})
    for eval_id, says in (
        (again, "measured twice"),
        (ungraded, "was not graded"),
        ("eval_missing", "no eval"),
    ):
        refused = harnessrl("eval", "rates", eval_id, "--out", str(out))
        assert refused.exit_code != 0 and says in refused.stderr, refused.stderr
        assert refused.stderr.startswith("harnessrl: ") and refused.stderr.count("\n") == 1
    assert out.read_text() == before
