"""The CLI's listings in a 60-column terminal, against the real api process and database: ids and statuses are
printed whole (never ``eval_5…`` or ``comple…``), nothing is wider than the terminal, and every listing's
``--json`` is one JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from services.cli.main import cli
from shared.models import Reward, Rollout, Run, Step
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec

pytestmark = pytest.mark.integration

api_server = product.api_server
WIDTH = 60


@pytest.fixture
def narrow(api_server: ApiServer, settings_env: dict[str, str]):  # type: ignore[no-untyped-def]
    """Invoke the CLI in-process in a terminal ``WIDTH`` columns wide; returns (exit code, output lines)."""
    env = {**settings_env, "HARNESSRL_API_URL": api_server.url, "COLUMNS": str(WIDTH)}

    def invoke(*args: str) -> tuple[int, list[str]]:
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        return result.exit_code, result.output.splitlines()

    return invoke


@pytest.fixture
def finished_run(narrow, db, tmp_path: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """A completed run with a long name, graded rollouts and two learner steps."""
    tasks = tmp_path / "narrow.jsonl"
    tasks.write_text("".join(json.dumps(task_spec(f"narrow-{i}")) + "\n" for i in range(2)))
    code, out = narrow("run", "create", "--harness", "reference", "--tasks-file", str(tasks), "--group-size", "2", "--steps", "2",
                       "--name", "a rather long run name for a narrow terminal", "--json")  # fmt: skip
    assert code == 0, out
    run = json.loads("\n".join(out))
    with db.begin() as session:
        for index, rollout in enumerate(session.scalars(select(Rollout).where(Rollout.run_id == run["id"]))):
            rollout.status, rollout.outcome = "graded", "resolved" if index % 2 else "unresolved"
            session.add(Reward(rollout_id=rollout.id, reward=float(index % 2), resolved=bool(index % 2),
                               tests={"FAIL_TO_PASS": {"tests/test_calc.py::test_add": "passed"}}))  # fmt: skip
        for step in (1, 2):
            session.add(
                Step(run_id=run["id"], step=step, policy_version=step, policy_lag_mean=0.5, metrics={})
            )
        session.execute(update(Run).where(Run.id == run["id"]).values(status="completed"))
    return run  # type: ignore[no-any-return]


def assert_fits_and_nothing_cut(lines: list[str], *whole: str) -> None:
    text = "\n".join(lines)
    assert all(len(line) <= WIDTH for line in lines), text
    assert "…" not in text, text
    for value in whole:
        assert any(value in line for line in lines), (value, text)


def test_run_list_keeps_ids_and_statuses_whole(narrow, finished_run) -> None:  # type: ignore[no-untyped-def]
    code, lines = narrow("run", "list", "--limit", "50")
    assert code == 0, lines
    assert_fits_and_nothing_cut(lines, finished_run["id"])
    row = next(line for line in lines if finished_run["id"] in line)
    assert "completed" in row, lines
    assert any("left out for width" in line for line in lines)
    code, lines = narrow("run", "list", "--limit", "50", "--json")
    assert finished_run["id"] in [item["id"] for item in json.loads("\n".join(lines))["items"]]


def test_run_status_and_rollout_show_fit_a_narrow_terminal(narrow, db, finished_run) -> None:  # type: ignore[no-untyped-def]
    code, lines = narrow("run", "status", finished_run["id"])
    assert code == 0, lines
    assert_fits_and_nothing_cut(
        lines, finished_run["id"], "completed", "reward per sampling step", "learner steps"
    )
    assert any(line.lstrip("│┃ ").startswith("2 ") and "2" in line[5:] for line in lines), lines  # step 2, v2
    code, lines = narrow("run", "status", finished_run["id"], "--json")
    assert json.loads("\n".join(lines))["id"] == finished_run["id"]

    with db() as session:
        rollout = session.scalars(select(Rollout).where(Rollout.run_id == finished_run["id"])).first()
    code, lines = narrow("rollout", "show", rollout.id)
    assert code == 0, lines
    assert_fits_and_nothing_cut(
        lines, rollout.id, finished_run["id"], "tests/test_calc.py::test_add", "passed"
    )
    code, lines = narrow("rollout", "show", rollout.id, "--json")
    assert json.loads("\n".join(lines))["run_id"] == finished_run["id"]
