"""``harnessrl run|rollout|sql`` against the real api process and database, through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, update

from services.cli.main import cli
from services.cli.run import reward_chart
from services.cli.sql import libpq_url
from shared.models import Group, Reward, Rollout, Run, Step
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec

pytestmark = pytest.mark.integration

api_server = product.api_server


@pytest.fixture
def harnessrl(api_server: ApiServer, settings_env: dict[str, str]):  # type: ignore[no-untyped-def]
    """Invoke the CLI in-process with the test settings and the running api."""
    env = {**settings_env, "HARNESSRL_API_URL": api_server.url, "COLUMNS": "250"}  # rich cuts at 80

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "mini.jsonl"
    path.write_text("".join(json.dumps(task_spec(f"cli-{i}")) + "\n" for i in range(2)))
    return path


def test_create_list_status_stop_watch(harnessrl, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    created = harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file),
                        "--group-size", "2", "--steps", "3", "--grpo", "clip_high=0.28", "--name", "cli", "--json")  # fmt: skip
    assert created.exit_code == 0, created.output
    run = json.loads(created.output)
    assert (run["config"]["dataset"], run["config"]["grpo"]["clip_high"], run["steps"]) == ("mini", 0.28, 3)
    assert run["progress"]["rollouts"] == {"queued": 4}

    listed = json.loads(harnessrl("run", "list", "--all", "--limit", "2", "--json").output)
    assert run["id"] in [item["id"] for item in listed["items"]]
    status = harnessrl("run", "status", run["id"])
    assert status.exit_code == 0 and run["id"] in status.output and "queued 4" in status.output

    stopped = harnessrl("run", "stop", run["id"])
    assert stopped.exit_code == 0 and ("stopping" in stopped.output or "stopped" in stopped.output)
    watched = harnessrl("run", "watch", run["id"], "--interval", "0.3", "--timeout", "30", "--json")
    assert watched.exit_code == 0, watched.output
    assert json.loads(watched.output.splitlines()[-1])["status"] == "stopped"


def test_watch_draws_the_reward_curve_and_times_out_on_a_live_run(harnessrl, db, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    with db.begin() as session:
        for index, rollout in enumerate(session.scalars(select(Rollout).where(Rollout.run_id == run["id"]))):
            rollout.status = "graded"
            session.add(Reward(rollout_id=rollout.id, reward=float(index % 2), tests={}))
    watched = harnessrl("run", "watch", run["id"], "--interval", "0.2", "--timeout", "0.5")
    assert watched.exit_code == 3  # still running when the timeout hit
    assert "mean reward per step" in watched.output and "8/8" in watched.output
    assert "█" in watched.output or "▄" in watched.output
    png = harnessrl("run", "plot", run["id"], "-o", str(tasks_file.with_suffix(".png")))
    assert png.exit_code == 0 and tasks_file.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_api_errors_become_one_clear_line(harnessrl, tasks_file: Path, settings_env) -> None:  # type: ignore[no-untyped-def]
    bad = harnessrl(
        "run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--grpo", "clip_low=5"
    )
    assert bad.exit_code == 2 and "body.grpo.clip_low" in bad.output  # the request's fault: a usage error
    missing = harnessrl("run", "status", "run_nope")
    assert missing.exit_code == 1 and "no run 'run_nope'" in missing.output
    env = {**settings_env, "HARNESSRL_API_URL": "http://127.0.0.1:9"}
    down = CliRunner().invoke(cli, ["run", "list"], env=env)
    assert down.exit_code == 1 and "cannot reach the api" in down.output
    usage = harnessrl("run", "create", "--harness", "reference")
    assert usage.exit_code == 2 and "--dataset" in usage.output


def test_rollout_show(harnessrl, db, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    with db.begin() as session:
        rollout = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).first()
        rollout.status = "graded"
        session.add(Reward(rollout_id=rollout.id, reward=1.0, resolved=True,
                           tests={"FAIL_TO_PASS": {"tests/test_calc.py::test_add": "passed"}}))  # fmt: skip
    shown = harnessrl("rollout", "show", rollout.id)
    assert shown.exit_code == 0, shown.output
    assert "cli-0" in shown.output or "cli-1" in shown.output
    assert "test_add" in shown.output and "passed" in shown.output
    as_json = json.loads(harnessrl("rollout", "show", rollout.id, "--json").output)
    assert as_json["reward"]["resolved"] is True


def test_rollout_show_names_the_outcome_not_the_reward_function(harnessrl, db, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    """An unresolved rollout graded by the reward function called ``resolved`` reads as unresolved; a rollout a
    limit ended shows the limit."""
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    with db.begin() as session:
        unresolved, limited = session.scalars(select(Rollout).where(Rollout.run_id == run["id"])).all()[:2]
        unresolved.status, unresolved.outcome = "graded", "unresolved"
        session.add(
            Reward(rollout_id=unresolved.id, reward=0.0, resolved=False, reward_fn="resolved", tests={})
        )
        limited.status, limited.outcome, limited.outcome_reason = "failed", "limit", "limit:wall_clock"
        limited.error = "limit:wall_clock: the harness ran past the rollout time limit and was killed"
    shown = harnessrl("rollout", "show", unresolved.id)
    assert shown.exit_code == 0, shown.output
    assert "unresolved" in shown.output and "(resolved, graded)" not in shown.output
    assert "0.0 by reward function 'resolved'" in shown.output
    shown = harnessrl("rollout", "show", limited.id)
    assert "limit (limit:wall_clock)" in shown.output and "- (not graded)" in shown.output
    as_json = json.loads(harnessrl("rollout", "show", limited.id, "--json").output)
    assert (as_json["outcome"], as_json["outcome_reason"]) == ("limit", "limit:wall_clock")


def test_run_list_counts_learner_steps_done(harnessrl, db, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    """A finished one-step run lists as 1/1, not as its last sampling step's index (0/1)."""
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    with db.begin() as session:
        session.execute(update(Run).where(Run.id == run["id"]).values(status="completed"))
        session.add(Step(run_id=run["id"], step=1, policy_version=1))
    listed = harnessrl("run", "list", "--limit", "50")
    line = next(line for line in listed.output.splitlines() if run["id"] in line)
    assert "1/1 done" in line and "0/1" not in line, listed.output
    item = next(
        i for i in json.loads(harnessrl("run", "list", "--json").output)["items"] if i["id"] == run["id"]
    )
    assert item["steps_done"] == 1


def test_sql_runs_read_only_queries(harnessrl, db) -> None:  # type: ignore[no-untyped-def]
    with db() as session:
        runs = session.scalar(select(func.count()).select_from(Run))
    counted = harnessrl("sql", "SELECT count(*) AS n FROM runs", "--json")
    assert counted.exit_code == 0 and json.loads(counted.output) == {"n": runs}
    table = harnessrl("sql", "SELECT instance_id FROM tasks ORDER BY instance_id LIMIT 1")
    assert table.exit_code == 0 and "instance_id" in table.output and "(1 row)" in table.output
    refused = harnessrl("sql", "DELETE FROM groups")
    assert refused.exit_code == 1 and "read-only" in refused.output
    with db() as session:
        assert session.scalar(select(func.count()).select_from(Group)) > 0
    typo = harnessrl("sql", "SELEC 1")
    assert typo.exit_code == 1 and "syntax error" in typo.output


def test_libpq_url_drops_the_driver() -> None:
    assert (
        libpq_url("postgresql+psycopg://postgres@127.0.0.1:5432/x")
        == "postgresql://postgres@127.0.0.1:5432/x"
    )


def test_reward_chart_scales_bars_and_marks_missing_steps() -> None:
    chart = reward_chart([0.0, 0.5, 1.0, None], height=4).splitlines()
    top, bottom = chart[0], chart[3]
    columns = [top[8 + 3 * i : 10 + 3 * i] for i in range(4)]
    assert columns == ["  ", "  ", "██", "  "]  # only reward 1.0 reaches the top row
    assert [bottom[8 + 3 * i : 10 + 3 * i] for i in range(4)] == ["  ", "██", "██", "  "]
    assert chart[-1].split() == ["step", "0", "1", "2", "3"]
    assert reward_chart([]) == "(no graded steps yet)"
    assert (
        reward_chart([None, None], height=2).splitlines()[1].startswith("  0.00 │")
    )  # no data yet: empty bars


def test_stopping_a_completed_run_is_an_error(harnessrl, db, tasks_file: Path) -> None:  # type: ignore[no-untyped-def]
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    with db.begin() as session:
        session.execute(update(Run).where(Run.id == run["id"]).values(status="completed"))
    refused = harnessrl("run", "stop", run["id"])
    assert refused.exit_code == 1 and "already completed" in refused.output


def test_add_tasks_from_a_file_and_a_bundled_dataset(harnessrl, tasks_file: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(task_spec("cli-extra")) + "\n")
    added = json.loads(harnessrl("run", "add-tasks", run["id"], "--tasks-file", str(more), "--json").output)
    assert (len(added["added"]), added["tasks"]) == (1, 3)
    bundled = harnessrl("run", "add-tasks", run["id"], "--dataset", "swe_mini", "--instance", "durations-1")
    assert bundled.exit_code == 0 and "1 task(s) added, 4 in all" in bundled.output


def test_status_shows_each_steps_window_busy_fractions_and_policy_lag(
    harnessrl, db, tasks_file: Path
) -> None:  # type: ignore[no-untyped-def]
    """What the learner records on each step row (its window, busy times, lag of its trained tokens), per step and
    over the run; rows written before the measurement show dashes."""
    run = json.loads(
        harnessrl("run", "create", "--harness", "reference", "--tasks-file", str(tasks_file), "--json").output
    )
    windows = [(100.0, 130.0, 12.0, 24.0, 0.0, 0, 60.0), (130.0, 150.0, 18.0, 10.0, 0.5, 1, 40.0)]
    with db.begin() as session:
        for step, (start, end, inference, learner, lag, lag_max, tokens) in enumerate(windows, start=1):
            metrics = {
                "window_start_unix": start, "window_end_unix": end, "wall_s": end - start,
                "inference_busy_s": inference, "inference_busy_fraction": inference / (end - start),
                "learner_busy_s": learner, "learner_busy_fraction": learner / (end - start),
                "policy_lag_max": lag_max, "loss_tokens": tokens,
            }  # fmt: skip
            session.add(
                Step(run_id=run["id"], step=step, policy_version=step, policy_lag_mean=lag, metrics=metrics)
            )
        session.add(Step(run_id=run["id"], step=3, policy_version=3, metrics={}))  # an older learner's row
    status = harnessrl("run", "status", run["id"])
    assert status.exit_code == 0, status.output
    lines = status.output.splitlines()
    assert any(
        "time per step" in line and "25.0 s; busy: inference 60%, learner 68%" in line for line in lines
    )
    assert any("policy lag" in line and "mean 0.20, max 1 (trained tokens)" in line for line in lines)
    second = next(line for line in lines if line.lstrip("│┃ ").startswith("2 "))
    assert "0.50" in second and " 20.0 " in second and "90%" in second and "50%" in second, second
    third = next(line for line in lines if line.lstrip("│┃ ").startswith("3 "))
    assert third.count(" - ") >= 4, third
