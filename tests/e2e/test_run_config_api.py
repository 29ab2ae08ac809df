"""A run created through the REST API is exactly what the services run: the api stores a ``RunConfig``
(``shared/run_config.py``) and the scheduler, runner, gateway and grader read that same model back.

Real processes throughout: the api (``harnessrl serve api``, its scheduler loop sending to the workers' queue),
Celery runner and grader workers, the gateway in front of the scripted policy, Postgres, Redis and S3.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from shared.harnesses import ShellOptions
from shared.models import Rollout
from shared.queues import ROLLOUTS_QUEUE
from tests.fixtures.product import ApiServer, running_api, stop_runs_created_since

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def api_with_workers(  # type: ignore[no-untyped-def]
    settings, settings_env, scripted_gateway, celery_workers, db, tmp_path
) -> Iterator[tuple[ApiServer, list[Any]]]:
    """The api sending rollouts to the test session's queue, with a runner and a grader worker on it."""
    env = {"HARNESSRL_GATEWAY_SOCKET": str(scripted_gateway.socket)}
    workers = [
        celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env),
        celery_workers("services.grader.tasks", ["grading"], env),
    ]
    started_at = datetime.now(UTC)
    try:
        with running_api(settings_env, settings.redis_url, tmp_path / "api.log") as api:
            yield api, workers
    finally:
        stop_runs_created_since(db, started_at, "stopped at the end of the test")


def wait_for_rollouts(api: ApiServer, run_id: str, n: int, workers, timeout_s: float = 180) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    with api.client() as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            detail = client.get(f"/v1/runs/{run_id}").json()
            if detail["progress"]["rollouts_done"] >= n:
                return detail
            time.sleep(0.5)
    logs = "\n=====\n".join(w.log.read_text(errors="replace")[-4000:] for w in workers)
    raise AssertionError(f"run {run_id}: {n} rollouts not done after {timeout_s}s: {detail}\n{logs}")


def test_shell_run_created_through_the_api_runs_and_is_graded(  # type: ignore[no-untyped-def]
    api_with_workers, scripted_policy, toy_task, db
):
    """The shell harness's command travels in ``harness.command``: the api stores it, the runner runs it (it
    calls the policy through the gateway and edits two files), the grader rewards the fix."""
    api, workers = api_with_workers
    scripted_policy.set_scripts([[{"say": "greet must say hello"}]])
    body = '{"model": "policy", "messages": [{"role": "user", "content": "what is wrong?"}]}'
    command = (
        'curl -sf -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" '
        f"-d '{body}' \"$OPENAI_BASE_URL/chat/completions\" > answer.json "
        "&& sed -i s/helo/hello/ greet.py && echo {instruction} > NOTES.txt"
    )
    run_body = {
        "model": "policy",
        "harness": {"name": "shell", "command": command},
        "tasks": [toy_task.model_dump(mode="json")],
        "group_size": 2,
    }
    with api.client() as client:
        created = client.post("/v1/runs", json=run_body)
        assert created.status_code == 201, created.text
        run = created.json()
        assert run["harness"] == "shell"
        assert run["config"]["harness"] == ShellOptions(command=command).model_dump(mode="json")
        detail = wait_for_rollouts(api, run["id"], 2, workers)
        assert detail["progress"]["rollouts"] == {"graded": 2}, detail
        with db() as session:
            rollout_ids = session.scalars(select(Rollout.id).where(Rollout.run_id == run["id"])).all()
        for rollout_id in rollout_ids:
            rollout = client.get(f"/v1/rollouts/{rollout_id}").json()
            assert (rollout["status"], rollout["harness"], rollout["error"]) == ("graded", "shell", None), (
                rollout
            )
            assert rollout["reward"]["reward"] == 1.0 and rollout["reward"]["resolved"] is True, rollout
            assert "+    return 'hello'" in rollout["patch"]["text"]
            assert f"+{toy_task.problem_statement}" in rollout["patch"]["text"]  # {instruction} substituted
            assert len(rollout["calls"]) == 1  # the command's curl call, through the gateway
        client.post(f"/v1/runs/{run['id']}/stop")


def _processes_running(argv: list[str]) -> list[int]:
    """Pids whose command line is exactly ``argv`` (from the process table)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")[:-1]  # noqa: SIM115
            except OSError:
                continue
            if [part.decode(errors="replace") for part in cmdline] == argv:
                found.append(int(entry))
    return found


def test_run_stop_cancels_a_hanging_harness_within_ten_seconds(  # type: ignore[no-untyped-def]
    api_with_workers, toy_task, db
):
    """``POST /v1/runs/{id}/stop`` while a harness hangs: the runner kills it (its process is gone), the rollout ends
    ``cancelled`` (reason ``run_stopped``, never graded), the queued one is cancelled before it starts, and the
    run ends ``stopped`` — all within 10 s of the stop."""
    api, workers = api_with_workers
    hang = ["sleep", "613"]
    run_body = {
        "model": "policy",
        "harness": {"name": "shell", "command": f"echo {{instruction}} > NOTES.txt && {' '.join(hang)}"},
        "tasks": [toy_task.model_dump(mode="json")],
        "group_size": 2,
    }
    with api.client() as client:
        created = client.post("/v1/runs", json=run_body)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while not _processes_running(hang):
            assert time.monotonic() < deadline, "the harness never started"
            time.sleep(0.2)

        stopped_at = time.monotonic()
        assert client.post(f"/v1/runs/{run_id}/stop").status_code == 200
        while True:
            detail = client.get(f"/v1/runs/{run_id}").json()
            if detail["status"] == "stopped" and not _processes_running(hang):
                break
            elapsed = time.monotonic() - stopped_at
            assert elapsed < 10, (
                f"{elapsed:.1f}s after the stop: {detail}, harness pids {_processes_running(hang)}"
            )
            time.sleep(0.2)

    with db() as session:
        rollouts = session.scalars(
            select(Rollout).where(Rollout.run_id == run_id).order_by(Rollout.index_in_group)
        ).all()
        ended = sorted((r.status, r.outcome, r.outcome_reason, r.attempt) for r in rollouts)
        killed = [r for r in rollouts if r.attempt == 1]
    # One was killed mid-run (attempt 1), the other never started (runner concurrency 1).
    assert ended == [
        ("cancelled", "cancelled", "run_stopped", 0),
        ("cancelled", "cancelled", "run_stopped", 1),
    ]
    assert "the runner killed the harness" in (killed[0].error or ""), killed[0].error
    assert killed[0].meta["attempts"][0]["killed_reason"] == "run_stopped"
