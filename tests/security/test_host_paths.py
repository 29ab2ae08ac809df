"""Host paths (issue 36, build item 3): no root-only file of the host reaches a sandbox, and a REST client cannot make
the runner read a host folder.

- Through the real api (``harnessrl serve api``): a task posted with a ``dir`` source or a local git repository
  (``/root``, ``/etc``, a folder holding a 0600 root-owned secret, ``file:///root/...``), or a task file outside the
  operator's allow-list, is a 422 naming the field, and no run, task or eval row is written; remote-helper and
  option-like git URLs are refused too. With ``HARNESSRL_TASK_DIR_ALLOWLIST`` set, a folder under it is accepted.
- Through the real runner, sandbox and grader (``attack``: a shell harness that ``cat``s what it was given into the
  workspace): a task whose ``dir`` source (or local git repository) was written straight into the database, as an
  operator would, holding a 0600 root-owned file (or a 0700 folder) is refused before the harness starts; the
  secret is in no patch, and the rollout's error names the file. A symlink in the source to a root-only host file
  or to ``/etc/shadow`` stays a link and gives the harness nothing.
- A shell harness's ``home_template`` holding a 0600 root-owned file is refused with a recorded reason; one holding
  a symlink to ``/etc/shadow`` is copied as a link, which the harness cannot read through.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import func, select

from services.grader.grade import grade_rollout
from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.host_paths import HostPathRefused
from shared.models import Eval, Reward, Rollout, Run
from shared.models import Task as TaskRow
from shared.tasks import Task, commit_tree
from tests.fixtures.product import API_REDIS_DB, running_api, stop_runs_created_since, task_spec
from tests.fixtures.services import REDIS_BASE
from tests.security.conftest import MODEL_CALL, AttackResult

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="a root-only file needs the tests to run as root"),
]

GREET = "def greet():\n    return 'helo'\n"
TEST_GREET = "from greet import greet\n\n\ndef test_greet():\n    assert greet() == 'hello'\n"


def world_searchable_dir(prefix: str) -> Path:
    """A folder the sandbox user can reach (pytest's ``tmp_path`` sits under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


# --- through the REST API --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def allowed_root() -> Iterator[Path]:
    path = world_searchable_dir("harnessrl-allowed-tasks-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _api(settings_env: dict[str, str], db: Any, allowlist: str) -> Iterator[httpx.Client]:
    url = f"{REDIS_BASE}/{API_REDIS_DB}"
    redis.Redis.from_url(url).flushdb()
    started_at = datetime.now(UTC)
    log = Path(tempfile.mkdtemp(prefix="harnessrl-api-hostpaths-")) / "api.log"
    env = {**settings_env, "HARNESSRL_TASK_DIR_ALLOWLIST": allowlist}
    with running_api(env, url, log) as server, server.client() as client:
        yield client
    stop_runs_created_since(db, started_at, "test module ended")
    redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="module")
def api_default(settings_env, db) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    """The api as shipped: no allow-list."""
    yield from _api(settings_env, db, "")


@pytest.fixture(scope="module")
def api_allowing(settings_env, db, allowed_root: Path) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    """The api with one allowed folder."""
    yield from _api(settings_env, db, str(allowed_root))


@pytest.fixture
def secret_dir(tmp_path: Path) -> Path:
    """A task folder holding a 0600 root-owned secret (outside the allow-list)."""
    repo = tmp_path / "secret-repo"
    repo.mkdir()
    (repo / "greet.py").write_text(GREET)
    (repo / "id_rsa").write_text("-----BEGIN KEY-----\n")
    (repo / "id_rsa").chmod(0o600)
    return repo


def counts(db: Any) -> tuple[int, int, int]:
    with session_scope(db) as session:
        return (
            int(session.scalar(select(func.count()).select_from(Run)) or 0),
            int(session.scalar(select(func.count()).select_from(TaskRow)) or 0),
            int(session.scalar(select(func.count()).select_from(Eval)) or 0),
        )


def task_with(instance_id: str, source: dict[str, str]) -> dict[str, Any]:
    return {**task_spec(instance_id), "source": source}


def run_body(tasks: list[dict[str, Any]] | None = None, **source: Any) -> dict[str, Any]:
    """A run body whose tasks are ``tasks`` (inline) or ``source`` (``dataset``, ``dataset_file``)."""
    return {
        "model": "policy",
        "harness": "reference",
        "group_size": 1,
        **({"tasks": tasks} if tasks else source),
    }


def assert_refused(response: httpx.Response, loc: str, *words: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["error"] == "validation_error" and error["detail"][0]["loc"] == loc, error
    assert "\n" not in error["message"] and all(w in error["message"] for w in words), error["message"]


HOST_SOURCES = {
    "dir /root": {"kind": "dir", "path": "/root"},
    "dir /etc": {"kind": "dir", "path": "/etc"},
    "dir /etc via ..": {"kind": "dir", "path": "/tmp/../etc"},
    "git file:///root": {"kind": "git", "url": "file:///root/private.git"},
    "git /root path": {"kind": "git", "url": "/root/private.git"},
}


@pytest.mark.parametrize("which", list(HOST_SOURCES))
def test_a_task_naming_a_host_folder_is_refused_by_default(api_default: httpx.Client, db, which: str) -> None:  # type: ignore[no-untyped-def]
    source = HOST_SOURCES[which]
    field = "url" if source["kind"] == "git" else "path"
    before = counts(db)
    response = api_default.post("/v1/runs", json=run_body([task_with(f"hp-{secrets.token_hex(4)}", source)]))
    assert_refused(response, f"body.tasks.0.source.{field}", "HARNESSRL_TASK_DIR_ALLOWLIST", "refused")
    assert counts(db) == before  # no run, no task row


def test_a_folder_holding_a_root_only_secret_is_refused_on_every_route(
    api_default: httpx.Client, db, secret_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    task = task_with("hp-secret", {"kind": "dir", "path": str(secret_dir)})
    before = counts(db)
    assert_refused(api_default.post("/v1/runs", json=run_body([task])), "body.tasks.0.source.path", "refused")
    evaluation = {"harness": "reference", "tasks": [task]}
    assert_refused(api_default.post("/v1/evals", json=evaluation), "body.tasks.0.source.path", "refused")
    assert counts(db) == before
    # Tasks added to a run go through the same wall.
    run = api_default.post("/v1/runs", json=run_body(dataset="swe_mini"))
    assert run.status_code == 201, run.text
    added = api_default.post(f"/v1/runs/{run.json()['id']}/tasks", json={"tasks": [task]})
    assert_refused(added, "body.tasks.0.source.path", "refused")
    with session_scope(db) as session:
        assert (
            session.scalar(
                select(func.count()).select_from(TaskRow).where(TaskRow.instance_id == "hp-secret")
            )
            == 0
        )


def test_a_task_file_outside_the_allow_list_is_refused(
    api_allowing: httpx.Client, db, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task_spec("hp-file-1")) + "\n")
    before = counts(db)
    response = api_allowing.post("/v1/runs", json=run_body(dataset_file=str(path)))
    assert_refused(response, "body.dataset_file", "not under an allowed folder")
    assert counts(db) == before


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% /tmp/harnessrl-ext-pwned",
        "fd::17",
        "--upload-pack=touch /tmp/harnessrl-pwned",
        "ftp://x/y",
    ],
)
def test_a_git_url_that_runs_a_program_is_refused(api_allowing: httpx.Client, db, url: str) -> None:  # type: ignore[no-untyped-def]
    before = counts(db)
    response = api_allowing.post(
        "/v1/runs", json=run_body([task_with("hp-git", {"kind": "git", "url": url})])
    )
    assert_refused(response, "body.tasks.0.source.url", "git URL")
    assert counts(db) == before


def test_a_folder_under_the_allow_list_is_accepted_and_others_are_not(
    api_allowing: httpx.Client, db, allowed_root: Path, secret_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    inside = allowed_root / "calc"
    inside.mkdir()
    accepted = api_allowing.post(
        "/v1/runs", json=run_body([task_with("hp-ok", {"kind": "dir", "path": str(inside)})])
    )
    assert accepted.status_code == 201, accepted.text
    remote = api_allowing.post(
        "/v1/runs",
        json=run_body([task_with("hp-remote", {"kind": "git", "url": "https://github.com/x/y.git"})]),
    )
    assert remote.status_code == 201, remote.text
    # A task file under the allowed folder, its relative source resolved against it.
    task_file = allowed_root / "tasks.jsonl"
    task_file.write_text(json.dumps(task_with("hp-rel", {"kind": "dir", "path": "calc"})) + "\n")
    from_file = api_allowing.post("/v1/runs", json=run_body(dataset_file=str(task_file)))
    assert from_file.status_code == 201, from_file.text
    before = counts(db)
    for path in (str(secret_dir), "/etc", str(allowed_root / ".." / "etc"), f"{allowed_root}-sibling"):
        response = api_allowing.post(
            "/v1/runs", json=run_body([task_with("hp-out", {"kind": "dir", "path": path})])
        )
        assert_refused(response, "body.tasks.0.source.path", "not under an allowed folder")
    # A symlink under the allowed folder that leads out of it is judged by where it leads.
    (allowed_root / "escape").symlink_to("/root")
    escape = api_allowing.post(
        "/v1/runs",
        json=run_body([task_with("hp-esc", {"kind": "dir", "path": str(allowed_root / "escape")})]),
    )
    assert_refused(escape, "body.tasks.0.source.path", "not under an allowed folder")
    assert counts(db) == before


# --- through the runner, the sandbox and the grader ------------------------------------------------------

STEAL = """cat secret.txt > stolen-1.txt 2>/dev/null
cat conf/secret.txt > stolen-2.txt 2>/dev/null
cat private/notes.txt > stolen-3.txt 2>/dev/null
cat leak > stolen-4.txt 2>/dev/null
cat shadow > stolen-5.txt 2>/dev/null
cat "$HOME/secret" > stolen-6.txt 2>/dev/null
cat "$HOME/shadow" > stolen-7.txt 2>/dev/null
cat "$HOME/.config/agent/leak" > stolen-8.txt 2>/dev/null
true"""


def _base_commit(source: Path) -> str:
    """The commit a ``dir`` source of these files gives (computed as the code before the fix copied it, so the test
    runs the same task on both)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        return commit_tree(repo)


def _toy_files(repo: Path) -> None:
    (repo / "tests").mkdir(parents=True)
    (repo / "greet.py").write_text(GREET)
    (repo / "tests" / "test_greet.py").write_text(TEST_GREET)


def _task(source: dict[str, str], base_commit: str) -> Task:
    return Task(
        instance_id="toy-greet", repo="toy/greet", source=source, base_commit=base_commit,  # type: ignore[arg-type]
        problem_statement="greet() returns 'helo'; it must return 'hello'. Fix greet.py.",
        FAIL_TO_PASS=["tests/test_greet.py::test_greet"], protected_paths=["tests"],
    )  # fmt: skip


@pytest.fixture
def host_secret(tmp_path: Path) -> tuple[Path, str]:
    """A root-only host file (0600, owner root) and its content."""
    path = tmp_path / "host-only" / "key"
    path.parent.mkdir()
    value = f"HOST-SECRET-{secrets.token_hex(8)}"
    path.write_text(value)
    path.chmod(0o600)
    return path, value


def _shadow_bytes() -> bytes:
    try:
        return Path("/etc/shadow").read_bytes()
    except OSError:
        return b""


def assert_nothing_leaked(result: AttackResult, *values: str) -> None:
    patch = result.patch or b""
    for value in values:
        assert value.encode() not in patch, (
            f"{value} reached the patch:\n{patch.decode(errors='replace')[:2000]}"
        )
    shadow = _shadow_bytes()
    for line in shadow.splitlines():
        if b":$" in line:  # a hashed password
            assert line not in patch, "a line of /etc/shadow reached the patch"
    assert result.reward in (None, 0.0), result.reward_row


LAYOUTS = ["0600 file", "0600 file in a folder", "0700 folder"]


def _plant(repo: Path, layout: str, value: str) -> str:
    """Put the root-only content in ``repo``; returns the name the refusal must give."""
    if layout == "0600 file":
        (repo / "secret.txt").write_text(value)
        (repo / "secret.txt").chmod(0o600)
        return "secret.txt"
    if layout == "0600 file in a folder":
        (repo / "conf").mkdir()
        (repo / "conf" / "secret.txt").write_text(value)
        (repo / "conf" / "secret.txt").chmod(0o600)
        return "conf/secret.txt"
    (repo / "private").mkdir()
    (repo / "private" / "notes.txt").write_text(value)  # 0644, in a folder only root may enter
    (repo / "private").chmod(0o700)
    return "private"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_dir_source_holding_a_root_only_file_never_reaches_the_sandbox(
    attack: Callable[..., AttackResult], tmp_path: Path, host_secret: tuple[Path, str], layout: str
) -> None:
    repo = tmp_path / "repo"
    _toy_files(repo)
    value = f"TASK-SECRET-{secrets.token_hex(8)}"
    name = _plant(repo, layout, value)
    (repo / "leak").symlink_to(host_secret[0])
    (repo / "shadow").symlink_to("/etc/shadow")
    task = _task({"kind": "dir", "path": str(repo)}, _base_commit(repo))

    result = attack(task, STEAL)

    assert_nothing_leaked(result, value, host_secret[1])
    assert result.status == "failed" and result.patch is None, result
    reason = result.meta["attempts"][-1]["runner_error"]
    assert f"{repo}/{name}" in reason and "cannot read" in reason, reason
    assert result.error is not None and name in result.error


def test_a_symlink_in_a_dir_source_stays_a_link_that_gives_the_harness_nothing(
    attack: Callable[..., AttackResult], tmp_path: Path, host_secret: tuple[Path, str]
) -> None:
    repo = tmp_path / "repo"
    _toy_files(repo)
    (repo / "leak").symlink_to(host_secret[0])
    (repo / "shadow").symlink_to("/etc/shadow")
    task = _task({"kind": "dir", "path": str(repo)}, _base_commit(repo))

    result = attack(task, STEAL)

    assert result.status == "graded" and result.reward == 0.0, (
        result
    )  # accepted: a link is data, its target is never read by root
    assert_nothing_leaked(result, host_secret[1])


def test_a_local_git_source_holding_a_root_only_file_is_refused(
    attack: Callable[..., AttackResult], tmp_path: Path
) -> None:
    repo = tmp_path / "gitrepo"
    _toy_files(repo)
    value = f"GIT-SECRET-{secrets.token_hex(8)}"
    (repo / "secret.txt").write_text(value)
    base = commit_tree(repo)
    (repo / "secret.txt").chmod(0o600)
    task = _task({"kind": "git", "url": f"file://{repo}"}, base)

    result = attack(task, STEAL)

    assert_nothing_leaked(result, value)
    assert result.status == "failed" and result.patch is None, result
    reason = result.meta["attempts"][-1]["runner_error"]
    assert f"{repo}/secret.txt" in reason and "cannot read" in reason, reason


# --- a shell harness's home template ----------------------------------------------------------------------


@pytest.fixture
def shell_attack(
    scripted_gateway, scripted_policy, sandbox, db, store, redis_client, make_rollouts
) -> Callable[..., AttackResult]:  # type: ignore[no-untyped-def]
    """``attack`` (``tests/security/conftest.py``: one model call, then the script) with more shell-harness options
    (``home_template``): run, then grade."""

    def run(task: Task, script: str, **options: Any) -> AttackResult:
        settings = scripted_gateway.settings.model_copy(update={"rollout_retries": 0})
        harness = {
            "name": "shell", "command": f"{MODEL_CALL}\n{script}\n# {{instruction}}",
            "env": {"HARNESSRL_ATTACK_BASE_URL": "{base_url}"}, **options,
        }  # fmt: skip
        _, _, [rollout_id] = make_rollouts(task, harness)
        attempt = claim(settings, db, store, rollout_id)
        assert isinstance(attempt, Attempt), attempt
        execute_attempt(settings, db, store, sandbox, attempt)
        grading = grade_rollout(
            rollout_id,
            db=db,
            store=store,
            sandbox=sandbox,
            redis_client=redis_client,
            timeout_s=120,
            max_attempts=1,
        )
        with session_scope(db) as session:
            row = session.get(Rollout, rollout_id)
            assert row is not None
            reward = session.query(Reward).filter_by(rollout_id=rollout_id).one_or_none()
            return AttackResult(
                rollout_id=rollout_id, status=row.status, outcome=row.outcome, outcome_reason=row.outcome_reason,
                error=row.error, patch=store.get_bytes(row.patch_key) if row.patch_key else None,
                meta=dict(row.meta), reward=reward.reward if reward is not None else None,
                reward_row={c.name: getattr(reward, c.name) for c in Reward.__table__.columns} if reward else None,
                grading=grading,
            )  # fmt: skip

    return run


@pytest.fixture
def template() -> Iterator[Path]:
    path = world_searchable_dir("harnessrl-home-template-")
    (path / ".config" / "agent").mkdir(parents=True)
    (path / ".config" / "agent" / "settings.json").write_text("{}\n")
    for folder in (path / ".config", path / ".config" / "agent"):
        folder.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_home_template_holding_a_root_only_file_is_refused(
    shell_attack: Callable[..., AttackResult], toy_task: Task, template: Path
) -> None:
    value = f"TEMPLATE-SECRET-{secrets.token_hex(8)}"
    (template / "secret").write_text(value)
    (template / "secret").chmod(0o600)
    (template / "shadow").symlink_to("/etc/shadow")

    result = shell_attack(toy_task, STEAL, home_template=str(template))

    assert_nothing_leaked(result, value)
    assert result.status == "failed" and result.patch is None, result
    reason = result.meta["attempts"][-1]["runner_error"]
    assert f"{template}/secret" in reason and "cannot read" in reason, reason


def test_a_home_template_symlink_to_a_host_file_gives_the_harness_nothing(
    shell_attack: Callable[..., AttackResult], toy_task: Task, template: Path, host_secret: tuple[Path, str]
) -> None:
    (template / "shadow").symlink_to("/etc/shadow")
    (template / ".config" / "agent" / "leak").symlink_to(host_secret[0])

    result = shell_attack(toy_task, STEAL, home_template=str(template))

    assert result.status == "graded" and result.reward == 0.0, (
        result.error,
        result.meta,
    )  # links are copied as links
    assert_nothing_leaked(result, host_secret[1])


def test_a_home_template_may_not_bring_the_runners_own_folder(
    shell_attack: Callable[..., AttackResult], toy_task: Task, template: Path, host_secret: tuple[Path, str]
) -> None:
    # The runner reads its git audit log from HOME/.harnessrl as root: a template's link there pointed that read at a
    # root-only host folder, whose "log" landed in the rollout's record.
    audit = host_secret[0].parent / "git-commands.log"
    audit.write_text(f"log {host_secret[1]}\n")
    audit.chmod(0o600)
    (template / ".harnessrl").symlink_to(host_secret[0].parent)

    result = shell_attack(toy_task, STEAL, home_template=str(template))

    attempt = result.meta["attempts"][-1]
    assert host_secret[1] not in json.dumps(result.meta), attempt
    assert result.status == "failed" and result.patch is None, result
    assert ".harnessrl" in attempt["runner_error"], attempt


def test_config_files_are_never_written_through_a_templates_link(tmp_path: Path) -> None:
    from shared.host_paths import write_below  # new with the fix

    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / ".config").symlink_to(outside)
    (home / "settings.json").symlink_to(outside / "victim")
    for relative in (".config/agent/settings.json", "settings.json"):
        with pytest.raises(HostPathRefused, match="link"):
            write_below(home, relative, "{}")
    assert list(outside.iterdir()) == []
    write_below(home, "a/b/c.json", "{}")
    assert (home / "a" / "b" / "c.json").read_text() == "{}"
