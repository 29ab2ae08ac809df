"""The REST API against a real ``harnessrl serve api`` process, real Postgres, Redis and S3.

Covers creating runs (rows, step 0, rollouts on the Celery queue), idempotency keys, 422 field paths with
nothing written, cursor pagination, run detail and plot, rollout detail with presigned links, stop, and the
scheduler's step transitions driven by the rows the learner and grader would write.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from shared.models import Call, Chain, Group, Reward, Rollout, Run, Step, Weight
from shared.queues import ROLLOUTS_QUEUE, RUN_ROLLOUT
from shared.rollout_records import retry_later
from shared.run_config import GRPOConfig, read_run_config
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec

# The product area's fixtures (tests/fixtures/product.py), made visible to this module.
api_server, api = product.api_server, product.api

pytestmark = pytest.mark.integration


def _run_body(*instance_ids: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "policy",
        "harness": "reference",
        "tasks": [task_spec(i) for i in instance_ids],
        "group_size": 2,
        **extra,
    }


def _wait_for(predicate, timeout_s: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached")


def _queued_rollout_ids(api_redis) -> set[str]:  # type: ignore[no-untyped-def]
    ids = set()
    for raw in api_redis.lrange(ROLLOUTS_QUEUE, 0, -1):
        message = json.loads(raw)
        if message["headers"]["task"] == RUN_ROLLOUT:
            args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            ids.add(args[0])
    return ids


def test_create_run_writes_step_zero_and_enqueues_every_rollout(
    api: httpx.Client, api_server: ApiServer, db
) -> None:
    api_redis = api_server.queue_redis
    response = api.post("/v1/runs", json=_run_body("create-a", "create-b", steps=3, name="first"))
    assert response.status_code == 201, response.text
    run = response.json()
    assert (run["status"], run["steps"], run["current_step"], run["name"]) == ("running", 3, 0, "first")
    assert run["progress"]["tasks"] == 2
    assert run["progress"]["rollouts"] == {"queued": 4}
    # The whole RunConfig is stored: defaults included, the harness as a section, the step size resolved.
    assert run["config"]["grpo"] == GRPOConfig().model_dump(mode="json")
    assert run["config"]["harness"] == {
        "name": "reference",
        "python": None,
        "max_turns": 30,
        "max_tokens": 1024,
    }
    assert (run["config"]["groups_per_step"], run["config"]["request_sha256"]) == (2, None)
    with db() as session:
        stored = read_run_config(session.get(Run, run["id"]))
    assert stored.model_dump(mode="json") == {**run["config"], "request_sha256": stored.request_sha256}

    with db() as session:
        groups = session.scalars(select(Group).where(Group.run_id == run["id"])).all()
        rollouts = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).all()
    assert sorted(g.step for g in groups) == [0, 0]
    assert sorted((r.group_id, r.index_in_group) for r in rollouts) == sorted(
        (g.id, i) for g in groups for i in range(2)
    )
    assert all(r.enqueued_at for r in rollouts)
    assert all(
        r.rollout_key is None for r in rollouts
    )  # the runner issues each attempt's key when it claims it
    assert {r.id for r in rollouts} <= _queued_rollout_ids(api_redis)


def test_tasks_are_upserted_by_dataset_and_instance(api: httpx.Client, db) -> None:
    first = api.post("/v1/runs", json=_run_body("upsert-a", dataset="upsert-suite")).json()
    changed = task_spec("upsert-a") | {"problem_statement": "A sharper statement."}
    second = api.post("/v1/runs", json={**_run_body(), "tasks": [changed], "dataset": "upsert-suite"}).json()
    assert first["config"]["task_ids"] == second["config"]["task_ids"]
    from shared.models import Task

    with db() as session:
        spec = session.get(Task, first["config"]["task_ids"][0]).spec
    assert spec["problem_statement"] == "A sharper statement."


def test_idempotency_key_replays_and_rejects_a_different_body(api: httpx.Client, db) -> None:
    headers = {"Idempotency-Key": f"idem-{time.time_ns()}"}
    first = api.post("/v1/runs", json=_run_body("idem-a"), headers=headers)
    replay = api.post("/v1/runs", json=_run_body("idem-a"), headers=headers)
    other = api.post("/v1/runs", json=_run_body("idem-b"), headers=headers)
    assert (first.status_code, replay.status_code, other.status_code) == (201, 200, 409)
    assert first.json()["id"] == replay.json()["id"]
    assert other.json()["error"] == "conflict"
    with db() as session:
        assert session.scalar(select(func.count()).select_from(Run).where(Run.id == first.json()["id"])) == 1
        groups = session.scalar(
            select(func.count()).select_from(Group).where(Group.run_id == first.json()["id"])
        )
    assert groups == 1  # the replay created no second step 0


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (_run_body("bad-a", group_size=0), "body.group_size"),
        (_run_body("bad-a", grpo={"clip_low": 1.5}), "body.grpo.clip_low"),
        (_run_body("bad-a", grpo={"clip_lowww": 0.1}), "body.grpo.clip_lowww"),
        (_run_body("bad-a", harness="vim"), "body.harness"),
        (
            {**_run_body(), "tasks": [task_spec("bad-a") | {"base_commit": "nope"}]},
            "body.tasks.0.base_commit",
        ),
        ({**_run_body(), "tasks": [task_spec("dup"), task_spec("dup")]}, "body.tasks.1.instance_id"),
        ({**_run_body(), "tasks": None, "dataset": "no-such-suite"}, "body.dataset"),
        ({**_run_body(), "tasks": None, "dataset_file": "/nonexistent/tasks.jsonl"}, "body.dataset_file"),
        (_run_body("bad-a", instance_ids=["bad-z"]), "body.instance_ids"),
        (_run_body("bad-a", harness="shell"), "body.harness.shell.command"),
        (
            _run_body("bad-a", harness={"name": "shell", "command": "no placeholder"}),
            "body.harness.shell.command",
        ),
        (
            _run_body("bad-a", harness={"name": "codex", "command": "x {instruction}"}),
            "body.harness.codex.command",
        ),
        (_run_body("bad-a", harness_command="x {instruction}"), "body.harness_command"),
        (_run_body("bad-a", limits={"wall_clock_s": "5"}), "body.limits.wall_clock_s"),
        (_run_body("bad-a", sampling={"temperature": 3}), "body.sampling.temperature"),
        (_run_body("bad-a", group_size="2"), "body.group_size"),
        ({"harness": "reference", "tasks": [task_spec("bad-a")]}, "body.model"),
    ],
)
def test_invalid_bodies_are_422_with_the_field_path_and_write_nothing(
    api: httpx.Client, db, body: dict[str, Any], loc: str
) -> None:
    with db() as session:
        before = session.scalar(select(func.count()).select_from(Run))
    response = api.post("/v1/runs", json=body)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["error"] == "validation_error"
    assert loc in [d["loc"] for d in error["detail"]], error
    with db() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == before


def test_malformed_json_and_bad_query_parameters_are_422(api: httpx.Client) -> None:
    response = api.post("/v1/runs", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == "body"
    for query, loc in [
        ("limit=0", "query.limit"),
        ("limit=x", "query.limit"),
        ("cursor=%%%", "query.cursor"),
        ("stauts=failed", "query.stauts"),  # a typo'd filter would otherwise list every run
    ]:
        response = api.get(f"/v1/runs?{query}")
        assert response.status_code == 422, query
        assert response.json()["detail"][0]["loc"] == loc


def test_pagination_walks_every_run_once_newest_first(api: httpx.Client) -> None:
    created = [api.post("/v1/runs", json=_run_body(f"page-{i}")).json()["id"] for i in range(3)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/runs", params=params).json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert [i for i in seen if i in created] == list(reversed(created))
    running = api.get("/v1/runs", params={"status": "running", "limit": 200}).json()["items"]
    assert {r["status"] for r in running} == {"running"}


def test_unknown_ids_are_404(api: httpx.Client) -> None:
    for path in ("/v1/runs/run_missing", "/v1/runs/run_missing/plot", "/v1/rollouts/ro_missing"):
        response = api.get(path)
        assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert api.post("/v1/runs/run_missing/stop").status_code == 404
    assert api.post("/v1/runs/run_missing/tasks", json={"tasks": [task_spec("x")]}).status_code == 404


def _grade_step(db, run_id: str, step: int, rewards: list[float]) -> None:  # type: ignore[no-untyped-def]
    """Write what runner and grader would: finished rollouts with rewards, groups complete."""
    with db.begin() as session:
        rollouts = session.scalars(
            select(Rollout).join(Group).where(Group.run_id == run_id, Group.step == step).order_by(Rollout.id)
        ).all()
        for rollout, reward in zip(rollouts, rewards * len(rollouts), strict=False):
            rollout.status = "graded"
            session.add(Reward(rollout_id=rollout.id, reward=reward, resolved=reward == 1.0, tests={}))
        session.execute(
            update(Group).where(Group.run_id == run_id, Group.step == step).values(status="complete")
        )


def test_run_detail_reward_curve_and_plot(api: httpx.Client, db) -> None:
    run = api.post("/v1/runs", json=_run_body("curve-a", "curve-b")).json()
    _grade_step(db, run["id"], 0, [1.0, 0.0])
    with db.begin() as session:
        session.add(Step(run_id=run["id"], step=0, policy_version=1, loss=0.5, kl=0.01, tokens=100))
    detail = api.get(f"/v1/runs/{run['id']}").json()
    (point,) = detail["reward_curve"]
    assert (point["step"], point["rollouts"], point["reward_mean"], point["resolved_rate"]) == (
        0,
        4,
        0.5,
        0.5,
    )
    assert point["reward_std"] == pytest.approx(0.5)
    assert detail["progress"]["rollouts_done"] == 4
    assert detail["step_metrics"][0]["loss"] == 0.5
    plot = api.get(f"/v1/runs/{run['id']}/plot")
    assert plot.status_code == 200 and plot.headers["Content-Type"] == "image/png"
    assert plot.content.startswith(b"\x89PNG\r\n\x1a\n") and len(plot.content) > 5000


def test_rollout_detail_has_calls_chains_patch_reward_and_fetchable_links(
    api: httpx.Client, db, store
) -> None:
    run = api.post("/v1/runs", json=_run_body("detail-a")).json()
    with db.begin() as session:
        rollout = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).first()
        patch_key = f"patches/{run['id']}/{rollout.id}.diff"
        log_key = f"logs/{run['id']}/{rollout.id}/harness.log"
        store.put_bytes(patch_key, b"--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a - b\n+a + b\n")
        store.put_bytes(log_key, b"agent finished\n")
        rollout.patch_key, rollout.status = patch_key, "graded"
        chain = Chain(rollout_id=rollout.id, tokens_prefix=f"tokens/{run['id']}/{rollout.id}/1", n_calls=2)
        fork = Chain(rollout_id=rollout.id, tokens_prefix="t", fork_reason="compaction", n_calls=1)
        session.add_all([chain, fork])
        session.flush()
        for chain_id, position in ((chain.id, 0), (chain.id, 1), (fork.id, 0)):
            session.add(
                Call(
                    rollout_id=rollout.id,
                    chain_id=chain_id,
                    position=position,
                    provider_api="openai_chat",
                    prompt_tokens=100,
                    suffix_tokens=10,
                    completion_tokens=20,
                    finish_reason="stop",
                    policy_version=0,
                    tokens_key=f"k{chain_id}{position}",
                    total_ms=12.5,
                )
            )
        session.add(Reward(rollout_id=rollout.id, reward=1.0, resolved=True, tests={"test_add": "passed"}))
    detail = api.get(f"/v1/rollouts/{rollout.id}").json()
    assert detail["task"]["instance_id"] == "detail-a" and detail["step"] == 0
    assert [(c["chain_id"] == chain.id, c["position"]) for c in detail["calls"]] == [
        (True, 0),
        (True, 1),
        (False, 0),
    ]
    assert [c["fork_reason"] for c in detail["chains"]] == [None, "compaction"]
    assert detail["reward"]["tests"] == {"test_add": "passed"} and detail["reward"]["resolved"] is True
    assert "+a + b" in detail["patch"]["text"] and detail["patch"]["truncated"] is False
    assert httpx.get(detail["patch"]["url"]).content == store.get_bytes(patch_key)
    assert [link["key"] for link in detail["logs"]] == [log_key]
    assert httpx.get(detail["logs"][0]["url"]).content == b"agent finished\n"


def test_stop_cancels_queued_rollouts_and_blocks_new_tasks(api: httpx.Client, db) -> None:
    run = api.post("/v1/runs", json=_run_body("stop-a")).json()
    response = api.post(f"/v1/runs/{run['id']}/stop")
    assert response.status_code == 200 and response.json()["status"] in ("stopping", "stopped")
    _wait_for(lambda: api.get(f"/v1/runs/{run['id']}").json()["status"] == "stopped")
    detail = api.get(f"/v1/runs/{run['id']}").json()
    assert detail["progress"]["rollouts"] == {"cancelled": 2} and detail["progress"]["rollouts_done"] == 2
    assert api.post(f"/v1/runs/{run['id']}/stop").status_code == 200  # stopping twice is fine
    blocked = api.post(f"/v1/runs/{run['id']}/tasks", json={"tasks": [task_spec("stop-b")]})
    assert blocked.status_code == 409


def test_added_tasks_are_sampled_by_later_steps(api: httpx.Client, db) -> None:
    run = api.post("/v1/runs", json=_run_body("add-a", steps=2)).json()
    added = api.post(f"/v1/runs/{run['id']}/tasks", json={"tasks": [task_spec("add-a"), task_spec("add-b")]})
    assert added.status_code == 200, added.text
    assert added.json()["tasks"] == 2 and len(added.json()["added"]) == 1
    again = api.post(f"/v1/runs/{run['id']}/tasks", json={"tasks": [task_spec("add-b")]}).json()
    assert again["added"] == [] and again["tasks"] == 2


def test_scheduler_waits_for_the_learner_and_inference_then_advances(api: httpx.Client, db) -> None:
    body = _run_body("sched-a", "sched-b", "sched-c", steps=3, groups_per_step=2)
    run_id = api.post("/v1/runs", json=body).json()["id"]
    assert api.get(f"/v1/runs/{run_id}").json()["config"]["groups_per_step"] == 2
    _grade_step(db, run_id, 0, [1.0, 0.0])
    time.sleep(2.5)  # several scheduler ticks: graded but not consumed by the learner, so no step 1
    assert api.get(f"/v1/runs/{run_id}").json()["current_step"] == 0

    # The learner's step commit: groups consumed, weights row, run version, in one transaction.
    with db.begin() as session:
        session.execute(update(Group).where(Group.run_id == run_id).values(status="consumed"))
        session.add(Weight(run_id=run_id, version=1, object_key=f"weights/{run_id}/1/model.safetensors"))
        session.execute(update(Run).where(Run.id == run_id).values(policy_version=1))
    time.sleep(2.5)  # published but not yet served: step 1 must not sample from the old policy
    assert api.get(f"/v1/runs/{run_id}").json()["current_step"] == 0

    with db.begin() as session:
        session.execute(update(Weight).where(Weight.run_id == run_id).values(status="served"))
    _wait_for(lambda: api.get(f"/v1/runs/{run_id}").json()["current_step"] == 1)
    with db() as session:
        step1 = session.scalars(select(Group).where(Group.run_id == run_id, Group.step == 1)).all()
        step0_tasks = set(
            session.scalars(select(Group.task_id).where(Group.run_id == run_id, Group.step == 0))
        )

    def step1_enqueued() -> bool:
        # The outbox: step 1's rows commit first and are sent and stamped after, in the same tick.
        with db() as session:
            stamps = session.scalars(
                select(Rollout.enqueued_at).join(Group).where(Group.id.in_([g.id for g in step1]))
            ).all()
            return bool(stamps) and all(stamps)

    _wait_for(step1_enqueued)
    assert len(step1) == 2 and {g.policy_version for g in step1} == {1}
    assert {g.task_id for g in step1} != step0_tasks  # the window moved on to the third task

    # Nothing to train on (zero reward variance): consumed, version unchanged, so step 2 starts at once.
    with db.begin() as session:
        session.execute(
            update(Group).where(Group.run_id == run_id, Group.step == 1).values(status="consumed")
        )
    _wait_for(lambda: api.get(f"/v1/runs/{run_id}").json()["current_step"] == 2)
    with db.begin() as session:
        session.execute(update(Group).where(Group.run_id == run_id, Group.step == 2).values(status="failed"))
    _wait_for(lambda: api.get(f"/v1/runs/{run_id}").json()["status"] == "completed")
    assert api.post(f"/v1/runs/{run_id}/stop").status_code == 409


def test_a_step_whose_rollouts_all_failed_fails_the_run_with_the_reason(api: httpx.Client, db) -> None:
    """E.g. a harness whose prompt does not fit the model's context: no calls, nothing graded, every step alike."""
    run_id = api.post("/v1/runs", json=_run_body("fail-a", steps=3)).json()["id"]
    with db.begin() as session:
        for rollout in session.scalars(select(Rollout).where(Rollout.run_id == run_id)):
            rollout.status, rollout.outcome, rollout.outcome_reason = "failed", "harness_error", "no_calls"
            rollout.error = "HTTP 400: prompt is too long: 9000 tokens, the served context is 4096"
        session.execute(update(Group).where(Group.run_id == run_id).values(status="failed"))
    _wait_for(lambda: api.get(f"/v1/runs/{run_id}").json()["status"] == "failed")
    detail = api.get(f"/v1/runs/{run_id}").json()
    assert "every rollout of step 0 failed (2 harness_error)" in detail["error"]
    assert "prompt is too long" in detail["error"] and detail["current_step"] == 0


def test_a_run_whose_stored_config_does_not_validate_is_listed_failed_and_holds_up_no_other(
    api: httpx.Client, db
) -> None:
    """E.g. a row written by an older version or by hand: listed with the reason instead of a 500 for the whole
    listing, failed by the scheduler, and a run whose next step cannot be written (a task row gone) does not stop
    the scheduler from advancing and sending the other runs' rollouts."""
    bad = api.post("/v1/runs", json=_run_body("badcfg-a")).json()["id"]
    stuck = api.post("/v1/runs", json=_run_body("badcfg-b", steps=2)).json()["id"]
    good = api.post("/v1/runs", json=_run_body("badcfg-c", steps=2)).json()["id"]
    with db.begin() as session:
        row = session.get(Run, bad)
        row.config = {**row.config, "steps": "many"}
        row = session.get(Run, stuck)
        row.config = {**row.config, "task_ids": ["task_gone"]}  # step 1's rollouts break the foreign key
        session.execute(update(Group).where(Group.run_id.in_([stuck, good])).values(status="consumed"))

    page = api.get("/v1/runs", params={"limit": 200})
    assert page.status_code == 200, page.text
    listed = {item["id"]: item for item in page.json()["items"]}
    assert listed[bad]["steps"] is None
    assert f"run {bad}: stored config is invalid: steps" in listed[bad]["config_error"]
    assert (listed[good]["steps"], listed[good]["config_error"]) == (2, None)
    detail = api.get(f"/v1/runs/{bad}")
    assert detail.status_code == 200, detail.text
    assert detail.json()["config"] is None and detail.json()["progress"]["tasks"] is None
    assert detail.json()["config_error"] == listed[bad]["config_error"]

    failed = _wait_for(lambda: (r := api.get(f"/v1/runs/{bad}").json())["status"] == "failed" and r)
    assert failed["error"] == failed["config_error"]

    def good_step1_enqueued() -> bool:
        with db() as session:
            stamps = session.scalars(
                select(Rollout.enqueued_at).join(Group).where(Group.run_id == good, Group.step == 1)
            ).all()
            return bool(stamps) and all(stamps)

    _wait_for(good_step1_enqueued)
    assert api.get(f"/v1/runs/{stuck}").json()["current_step"] == 0
    assert api.post(f"/v1/runs/{stuck}/stop").status_code == 200


def test_a_rollout_waiting_for_a_retry_is_sent_once_its_time_has_come(
    api: httpx.Client, api_server: ApiServer, db
) -> None:
    api_redis = api_server.queue_redis
    run = api.post("/v1/runs", json=_run_body("retry-a")).json()
    with db.begin() as session:
        rollouts = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).all()
        for rollout in rollouts:
            retry_later(
                rollout, delay_s=4.0, why="a test"
            )  # what the runner does when it puts a rollout back
        ids = {r.id for r in rollouts}
    api_redis.delete(ROLLOUTS_QUEUE)
    time.sleep(2.5)
    assert not ids & _queued_rollout_ids(api_redis)
    _wait_for(lambda: ids <= _queued_rollout_ids(api_redis))


def test_bundled_dataset_and_dataset_file_sources(api: httpx.Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from shared.datasets import load_dataset

    bundled = [t.instance_id for t in load_dataset("swe_mini")]
    body = {"model": "policy", "harness": "reference", "dataset": "swe_mini", "group_size": 1}
    whole = api.post("/v1/runs", json=body).json()
    assert whole["progress"]["tasks"] == len(bundled) >= 12
    subset = api.post("/v1/runs", json={**body, "instance_ids": bundled[:2]}).json()
    assert (
        subset["config"]["task_ids"] == whole["config"]["task_ids"][:2]
    )  # same rows: upserted, not duplicated

    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(task_spec(f"file-{i}")) + "\n" for i in range(3)))
    from_file = api.post("/v1/runs", json={**body, "dataset": None, "dataset_file": str(path)})
    assert from_file.status_code == 201, from_file.text
    assert (from_file.json()["config"]["dataset"], from_file.json()["progress"]["tasks"]) == ("suite", 3)
    path.write_text(path.read_text() + '{"instance_id": "broken"}\n')
    broken = api.post("/v1/runs", json={**body, "dataset": None, "dataset_file": str(path)})
    assert broken.status_code == 422 and ":4" in broken.json()["detail"][0]["msg"]  # names the bad line


def test_a_split_of_a_bundled_dataset(api: httpx.Client, db) -> None:  # type: ignore[no-untyped-def]
    from shared.datasets import load_dataset

    body = {"model": "policy", "harness": "codeblock", "dataset": "swe_micro", "group_size": 1}
    held_out = api.post("/v1/runs", json={**body, "split": "eval"})
    assert held_out.status_code == 201, held_out.text
    assert held_out.json()["progress"]["tasks"] == len(load_dataset("swe_micro", "eval")) >= 16
    with db() as session:
        before = session.scalar(select(func.count()).select_from(Run))
    for bad, loc in (
        ({"split": "test"}, "body.split"),
        ({"split": "eval", "dataset": None, "tasks": [task_spec("s-a")]}, "body"),
    ):
        response = api.post("/v1/runs", json={**body, **bad})
        assert response.status_code == 422, response.text
        assert any(d["loc"].startswith(loc) for d in response.json()["detail"]), response.text
    assert (
        "no split 'test'" in api.post("/v1/runs", json={**body, "split": "test"}).json()["detail"][0]["msg"]
    )
    with db() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == before


def test_rollouts_committed_but_never_sent_are_sent_by_the_scheduler(
    api: httpx.Client, api_server: ApiServer, db
) -> None:
    """The outbox: an api that died between committing rows and sending them loses nothing."""
    api_redis = api_server.queue_redis
    run = api.post("/v1/runs", json=_run_body("outbox-a")).json()
    with db.begin() as session:
        rollouts = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).all()
        for rollout in rollouts:
            rollout.enqueued_at = None  # as if the process died before the send
        ids = {r.id for r in rollouts}
    api_redis.delete(ROLLOUTS_QUEUE)

    def stamped() -> bool:
        with db() as session:
            stamps = session.scalars(select(Rollout.enqueued_at).where(Rollout.id.in_(ids))).all()
        return all(stamps)

    _wait_for(stamped)
    assert ids <= _queued_rollout_ids(api_redis)


def test_metrics_endpoint_reports_requests_by_route_pattern(api_server: ApiServer, api: httpx.Client) -> None:
    api.get("/v1/runs/run_missing")
    text = httpx.get(f"{api_server.url}/metrics").text
    assert 'route="/v1/runs/{run_id}"' in text and 'service="api"' in text
    assert "run_missing" not in text  # ids never become label values
    assert "harnessrl_runs_created_total" in text and "harnessrl_rollouts_enqueued_total" in text


# Every GRPO knob, by the name ``GRPOConfig`` documents it under: a value other than the default (valid), and a
# value of the wrong type. A knob added to GRPOConfig without a line here fails the first assertion below.
GRPO_WALK: dict[str, tuple[Any, Any]] = {
    "baseline": ("leave_one_out", 1),
    "normalize_std": (True, "yes"),
    "std_epsilon": (1e-4, "small"),
    "overlong_penalty": (0.5, "half"),
    "clip_low": (0.1, "0.1"),
    "clip_high": (0.3, [0.3]),
    "tis_cap": (None, "off"),
    "aggregation": ("sequence", True),
    "kl_coef": (0.05, "0.05"),
    "learning_rate": (3e-4, "fast"),
    "adam_beta1": (0.8, None),
    "adam_beta2": (0.99, "0.99"),
    "adam_epsilon": (1e-6, {}),
    "weight_decay": (0.01, "none"),
    "max_grad_norm": (None, "inf"),
    "max_policy_lag": (0, 1.5),
    "strategy": ("per_request", "dense"),
    "max_pack_tokens": (4096, 4096.5),
    "trie_attention": ("blocks", "dense"),
    "bf16_autocast": ("auto", 1),
    "seed": (7, "7"),
    "data_parallel": ("replicate", "ddp"),
    "activation_checkpointing": (True, "on"),
    "checkpoint_every": (3, 3.0),
    "keep_checkpoints": (5, "5"),
}


def test_every_grpo_knob_is_settable_through_the_api_by_its_documented_name(api: httpx.Client, db) -> None:
    assert set(GRPO_WALK) == set(GRPOConfig.model_fields)
    for name, (value, wrong) in GRPO_WALK.items():
        assert value != GRPOConfig.model_fields[name].default, name
        response = api.post("/v1/runs", json=_run_body(f"knob-{name}", grpo={name: value}))
        assert response.status_code == 201, (name, response.text)
        assert response.json()["config"]["grpo"][name] == value
        with db() as session:  # what the learner reads: the run's RunConfig, its grpo section
            assert getattr(read_run_config(session.get(Run, response.json()["id"])).grpo, name) == value

        refused = api.post("/v1/runs", json=_run_body(f"knob-{name}", grpo={name: wrong}))
        assert refused.status_code == 422, (name, wrong, refused.text)
        assert f"body.grpo.{name}" in [d["loc"] for d in refused.json()["detail"]], (name, refused.json())

    unknown = api.post("/v1/runs", json=_run_body("knob-x", grpo={"groups_per_step": 2, "clip_ratio": 0.2}))
    assert unknown.status_code == 422
    assert {d["loc"] for d in unknown.json()["detail"]} == {
        "body.grpo.groups_per_step",
        "body.grpo.clip_ratio",
    }
