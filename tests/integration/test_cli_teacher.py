"""``--teacher`` through the real CLI and api process (``services/cli/teacher.py``, ``services/api/teachers.py``):
``--teacher reference`` on an eval split, on held-out tasks or on tasks without a reference fix exits 2 and creates
nothing (no run, eval, task or rollout row, nothing queued); a bad URL never leaves the CLI; an accepted teacher is
stored in the run's config (its key's variable name, never a key)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, select

from services.cli.main import cli
from shared.models import Eval, Group, Rollout, Run, Task
from shared.queues import ROLLOUTS_QUEUE
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec

pytestmark = pytest.mark.integration

api_server = product.api_server


@pytest.fixture
def harnessrl(api_server: ApiServer, settings_env: dict[str, str]) -> Callable[..., Result]:
    env = {**settings_env, "HARNESSRL_API_URL": api_server.url, "COLUMNS": "250"}

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


def written(db, api_server: ApiServer) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Everything a create could have written: row counts and the rollouts queue."""
    with db() as session:
        counts = {
            m.__tablename__: session.scalar(select(func.count()).select_from(m))
            for m in (Run, Eval, Task, Group, Rollout)
        }
    return {**counts, "queued": api_server.queue_redis.llen(ROLLOUTS_QUEUE)}


def test_teacher_reference_on_an_eval_split_exits_2_creating_nothing(
    harnessrl, db, api_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    before = written(db, api_server)
    for args in (
        ("eval", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--split", "eval"),
        ("eval", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--split", "seen_eval"),
        ("run", "create", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--split", "eval"),
    ):
        refused = harnessrl(*args, "--teacher", "reference")
        assert refused.exit_code == 2, refused.output
        assert "--teacher" in refused.output or "body.teacher" in refused.output
        assert "eval split" in refused.output
    # Held-out tasks picked some other way (the whole dataset, or by instance id) are refused the same.
    (held_out,) = json.loads((Path("shared/datasets/swe_micro/splits.json")).read_text())["eval"][:1]
    for args in (
        ("run", "create", "--harness", "mini-swe-agent", "--dataset", "swe_micro"),
        ("eval", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--instance", held_out),
    ):
        refused = harnessrl(*args, "--teacher", "reference")
        assert refused.exit_code == 2 and "tasks of an eval split" in refused.output, refused.output
    # Tasks without a reference fix.
    tasks_file = tmp_path / "own.jsonl"
    tasks_file.write_text(json.dumps(task_spec("teacher-no-fix")) + "\n")
    refused = harnessrl(
        "run",
        "create",
        "--harness",
        "mini-swe-agent",
        "--tasks-file",
        str(tasks_file),
        "--teacher",
        "reference",
    )
    assert refused.exit_code == 2 and "teacher-no-fix" in refused.output and "reference fix" in refused.output
    assert written(db, api_server) == before


def test_the_api_refuses_teacher_reference_on_an_eval_split_with_a_clear_422(api_server, db) -> None:  # type: ignore[no-untyped-def]
    before = written(db, api_server)
    with api_server.client() as api:
        for path, body in (
            ("/v1/evals", {"harness": "mini-swe-agent", "dataset": "swe_micro", "split": "eval"}),
            (
                "/v1/runs",
                {"model": "m", "harness": "mini-swe-agent", "dataset": "swe_micro", "split": "seen_eval"},
            ),
        ):
            response = api.post(path, json={**body, "teacher": {"kind": "reference"}})
            assert response.status_code == 422, response.text
            (detail,) = response.json()["detail"]
            assert detail["loc"] == "body.teacher" and "eval split" in detail["msg"]
        unknown = api.post(
            "/v1/evals",
            json={
                "harness": "mini-swe-agent",
                "dataset": "swe_micro",
                "split": "train",
                "teacher": {"kind": "oracle"},
            },
        )
        assert unknown.status_code == 422 and "teacher" in unknown.text
    assert written(db, api_server) == before


def test_a_bad_teacher_url_never_leaves_the_cli(harnessrl, db, api_server) -> None:  # type: ignore[no-untyped-def]
    before = written(db, api_server)
    for teacher in ("ftp://example.com/v1", "https://user:sk-1@example.com/v1", "reference-ish"):
        refused = harnessrl(
            "run",
            "create",
            "--harness",
            "mini-swe-agent",
            "--dataset",
            "swe_micro",
            "--split",
            "train",
            "--teacher",
            teacher,
        )
        assert refused.exit_code == 2 and "--teacher" in refused.output, refused.output
    stray = harnessrl(
        "eval",
        "--harness",
        "mini-swe-agent",
        "--dataset",
        "swe_micro",
        "--split",
        "train",
        "--teacher-key-env",
        "KEY",
    )
    assert stray.exit_code == 2 and "need --teacher URL" in stray.output
    assert written(db, api_server) == before


def test_an_accepted_teacher_is_stored_in_the_run_config(harnessrl) -> None:  # type: ignore[no-untyped-def]
    created = harnessrl(
        "run", "create", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--split", "train",
        "--instance", "clamp-1", "--group-size", "1", "--teacher", "https://teacher.example.com/v1",
        "--teacher-model", "big", "--teacher-key-env", "TEACHER_KEY", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    config = json.loads(created.output)["config"]
    assert config["teacher"] == {
        "kind": "url", "base_url": "https://teacher.example.com/v1", "model": "big", "api_key_env": "TEACHER_KEY",
        "timeout_s": 600.0,
    }  # fmt: skip
    reference = harnessrl(
        "run", "create", "--harness", "mini-swe-agent", "--dataset", "swe_micro", "--split", "train",
        "--instance", "clamp-1", "--group-size", "1", "--teacher", "reference", "--json",
    )  # fmt: skip
    assert reference.exit_code == 0, reference.output
    assert json.loads(reference.output)["config"]["teacher"]["kind"] == "reference"


def test_an_eval_on_a_train_split_may_name_the_reference_teacher(api_server, db) -> None:  # type: ignore[no-untyped-def]
    from shared.run_config import read_run_config

    with api_server.client() as api:
        body = {
            "harness": "mini-swe-agent",
            "dataset": "swe_micro",
            "split": "train",
            "instance_ids": ["clamp-2"],
        }
        response = api.post("/v1/evals", json={**body, "teacher": {"kind": "reference"}})
    assert response.status_code == 201, response.text
    with db() as session:
        run = session.get(Run, response.json()["id"])
        assert run is not None and run.kind == "eval"
        assert read_run_config(run).teacher is not None and read_run_config(run).teacher.kind == "reference"
