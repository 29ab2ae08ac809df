"""``POST /v1/runs`` checks a harness before the run exists (issue 16), against a real ``harnessrl serve api``
serving the tiny model (4096-token context):

- a ``shell`` harness's mount of ``/``, of the host's home or of the data directory is a 422 whose one-line
  message names the path (and the option), and nothing is written;
- a Claude Code run is created with a warning that its first prompt (~17.6k tokens) exceeds the model's context;
  with ``strict`` it is refused (422) instead; a harness whose first prompt fits gets no warning, and so does
  Claude Code with ``bare: true`` (~1.5k tokens, counted from its own capture), from the API and the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import func, select

from shared.datasets import load_dataset
from shared.models import Run
from tests.fixtures.product import API_REDIS_DB, running_api, stop_runs_created_since, task_spec
from tests.fixtures.services import REDIS_BASE, REPO_ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(settings_env, tiny_model_dir, db) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    url = f"{REDIS_BASE}/{API_REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    started_at = datetime.now(UTC)
    log = Path(tempfile.mkdtemp(prefix="harnessrl-api-checks-")) / "api.log"
    env = {**settings_env, "HARNESSRL_MODEL_DIR": str(tiny_model_dir)}
    with running_api(env, url, log) as server, server.client() as client:
        yield client
    stop_runs_created_since(db, started_at, "test module ended")
    redis.Redis.from_url(url).flushdb()


def body(harness: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "policy", "harness": harness, "tasks": [task_spec("checks-1")], "group_size": 1, **extra}


def runs_count(db) -> int:  # type: ignore[no-untyped-def]
    with db() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


@pytest.mark.parametrize("which", ["root", "home", "data_dir"])
def test_a_refused_mount_is_a_422_naming_the_path(api: httpx.Client, db, settings, which: str) -> None:  # type: ignore[no-untyped-def]
    path = {"root": "/", "home": str(Path.home()), "data_dir": str(settings.data_dir)}[which]
    before = runs_count(db)
    shell = {"name": "shell", "command": "agent {instruction}", "mounts": ["/usr/bin", path]}
    response = api.post("/v1/runs", json=body(shell))
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert "\n" not in message and f"mount {path} is refused" in message, message
    assert response.json()["detail"][0]["loc"] == "harness.mounts[1]"
    assert runs_count(db) == before  # nothing written


def test_a_missing_home_template_is_a_422(api: httpx.Client) -> None:
    shell = {"name": "shell", "command": "agent {instruction}", "home_template": "/nonexistent/template"}
    response = api.post("/v1/runs", json=body(shell))
    assert (
        response.status_code == 422 and "/nonexistent/template does not exist" in response.json()["message"]
    )


def test_claude_code_on_the_tiny_model_is_warned_and_refused_when_strict(api: httpx.Client, db) -> None:  # type: ignore[no-untyped-def]
    created = api.post("/v1/runs", json=body("claude-code"))
    assert created.status_code == 201, created.text
    [warning] = created.json()["warnings"]
    assert "'claude-code'" in warning and "context length is 4096" in warning, warning

    before = runs_count(db)
    refused = api.post("/v1/runs", json=body("claude-code", strict=True))
    assert refused.status_code == 422, refused.text
    assert "context length is 4096" in refused.json()["message"] and runs_count(db) == before

    fits = api.post("/v1/runs", json=body("pi", strict=True))  # Pi's first prompt is ~2k tokens
    assert fits.status_code == 201 and fits.json()["warnings"] == [], fits.text
    # claude -p --bare: 3 tools and a one-line system prompt, ~1.5k tokens; its own capture is counted
    bare = api.post("/v1/runs", json=body({"name": "claude-code", "bare": True}, strict=True))
    assert bare.status_code == 201 and bare.json()["warnings"] == [], bare.text
    assert bare.json()["config"]["harness"] == {"name": "claude-code", "bare": True, "max_turns": None}, (
        bare.json()["config"]
    )


def test_the_cli_prints_the_warning_and_strict_fails(api: httpx.Client, settings_env) -> None:  # type: ignore[no-untyped-def]
    env = {**settings_env, "HARNESSRL_API_URL": str(api.base_url).rstrip("/")}
    env.setdefault("HARNESSRL_API_TOKEN", api.headers["Authorization"].removeprefix("Bearer "))
    tasks = Path(tempfile.mkdtemp(prefix="harnessrl-cli-checks-")) / "tasks.jsonl"
    tasks.write_text(json.dumps(task_spec("checks-cli")) + "\n")
    argv = [sys.executable, "-m", "services.cli.main", "run", "create", "--harness", "claude-code",
            "--model", "policy", "--tasks-file", str(tasks), "--group-size", "1"]  # fmt: skip
    warned = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert warned.returncode == 0 and "warning: harness 'claude-code'" in warned.stderr, warned.stderr
    strict = subprocess.run(
        [*argv, "--strict"], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert strict.returncode != 0 and "context length is 4096" in strict.stderr + strict.stdout, strict.stderr
    # Claude Code with bare=true fits, on a bundled dataset's split too (only that split's tasks)
    bare_argv = [sys.executable, "-m", "services.cli.main", "run", "create", "--harness", "claude-code",
                 "--harness-option", "bare=true", "--model", "policy", "--dataset", "swe_micro", "--split", "train",
                 "--group-size", "1", "--strict", "--json"]  # fmt: skip
    bare = subprocess.run(bare_argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0 and "warning" not in bare.stderr, bare.stderr
    created = json.loads(bare.stdout)
    assert created["config"]["harness"] == {"name": "claude-code", "bare": True, "max_turns": None}, created[
        "config"
    ]
    assert created["progress"]["tasks"] == len(load_dataset("swe_micro", "train")), created["progress"]
