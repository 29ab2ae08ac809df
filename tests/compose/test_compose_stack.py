"""``docker compose up``, really run (issues 18 and 40), on images built here from a debootstrap base.

One stack per module (``tests/fixtures/compose.py``), tests in order:
1. it comes up healthy, the ``learners`` controller included;
2. a run created through the REST API, and nothing else, trains to its last step (two learner steps, each a new
   policy version): the ``learners`` service starts its learner and lets it go when the run is over; its rows
   are queryable with SQL through the Postgres container;
3. two runs created together both train; the first one's learner process is SIGKILLed mid-run and the
   controller restarts it (the run resumes from its checkpoint and completes); the object store is restarted
   (``docker compose restart minio``) while the second runs, and every object the runs recorded before the
   restart is readable after it, and every one they recorded at all at the end;
4. a third run survives its gateway being SIGKILLed mid-rollout: ``compose ps`` shows the gateway down or
   not yet healthy, Docker restarts it under the restart policy, and the run completes;
5. a malformed ``HARNESSRL_DATABASE_URL`` in the compose environment makes the api exit with the one-line
   settings error, visible in ``compose logs``;
6. the runner and grader run their sandboxes under compose/sandbox-seccomp.json without SYS_ADMIN, and the api
   refuses the default token and (outside the dev profile) the shipped secrets;
7. ``down -v`` leaves no container, network or volume of the project behind.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from services.api.client import ApiClient
from tests.fixtures.compose import API_TOKEN, DOWN, LONG_RUNNING, ComposeStack, wait_until

# The first test's setup builds the images (a cold machine: debootstrap, Debian packages, vLLM; ~20 min on 2 busy
# cores) and brings the stack up; the runs take minutes each.
pytestmark = [pytest.mark.compose, pytest.mark.slow, pytest.mark.timeout(5400)]

STEPS, GROUP_SIZE = 2, 2
RUN_TIMEOUT_S = 900


def api(stack: ComposeStack) -> ApiClient:
    return ApiClient(f"http://127.0.0.1:{stack.port('HARNESSRL_API_PORT')}", API_TOKEN, timeout_s=60)


def create_run(stack: ComposeStack, name: str) -> str:
    """A training run, created through the REST API only: no learner is started by hand."""
    with api(stack) as client:
        run = client.create_run(
            {
                "name": name,
                "model": "policy",
                "harness": "reference",
                "dataset": "swe_mini",
                "instance_ids": ["textkit-1"],
                "groups_per_step": 1,
                "group_size": GROUP_SIZE,
                "steps": STEPS,
                "grpo": {"learning_rate": 1e-4},
                "sampling": {"temperature": 1.0, "max_tokens": 128},
            }
        )
    return str(run["id"])


def run_status(stack: ComposeStack, run_id: str) -> str:
    with api(stack) as client:
        return str(client.get_run(run_id)["status"])


def wait_for_run(stack: ComposeStack, run_id: str) -> dict[str, Any]:
    try:
        wait_until(
            lambda: run_status(stack, run_id) in ("completed", "failed", "stopped"),
            RUN_TIMEOUT_S,
            f"run {run_id} to finish",
            every_s=5,
        )
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{stack.diagnostics()}") from None
    with api(stack) as client:
        return client.get_run(run_id)


def calls_of(run_id: str) -> str:
    return f"SELECT count(*) FROM calls JOIN rollouts ON rollouts.id = calls.rollout_id WHERE run_id = '{run_id}'"


def objects_of(stack: ComposeStack, run_id: str) -> set[str]:
    """Every object key the run's rows record: call tokens and raw bodies, patches, grading logs, weight versions,
    and the objects under each rollout attempt's logs prefix (``rollouts.logs_key``: its report and the harness's
    output)."""
    q = f"'{run_id}'"
    rows = stack.psql(
        f"SELECT tokens_key FROM calls JOIN rollouts r ON r.id = calls.rollout_id WHERE r.run_id = {q} "
        f"UNION SELECT raw_key FROM calls JOIN rollouts r ON r.id = calls.rollout_id WHERE r.run_id = {q} "
        f"UNION SELECT patch_key FROM rollouts WHERE run_id = {q} "
        f"UNION SELECT rewards.logs_key FROM rewards JOIN rollouts r ON r.id = rewards.rollout_id WHERE r.run_id = {q} "
        f"UNION SELECT object_key FROM weights WHERE run_id = {q}"
    )
    keys = {row[0] for row in rows if row and row[0]}
    store = stack.object_store()
    for [prefix] in stack.psql(f"SELECT logs_key FROM rollouts WHERE run_id = {q} AND logs_key IS NOT NULL"):
        under = set(store.list(f"{prefix}/"))
        assert f"{prefix}/report.json" in under, (prefix, under)
        keys |= under
    return keys


def unreadable(stack: ComposeStack, keys: set[str]) -> list[str]:
    store = stack.object_store()
    missing = []
    for key in sorted(keys):
        try:
            store.get_bytes(key)
        except Exception as exc:  # noqa: BLE001 - any failure to read it back is what this reports
            missing.append(f"{key}: {exc!r}")
    return missing


def check_run_rows(stack: ComposeStack, run_id: str) -> None:
    """The run's rows, read with SQL through the Postgres container."""
    q = f"'{run_id}'"
    [[status, version]] = stack.psql(f"SELECT status, policy_version FROM runs WHERE id = {q}")
    assert (status, int(version)) == ("completed", STEPS)
    steps = stack.psql(f"SELECT step, policy_version FROM steps WHERE run_id = {q} ORDER BY step")
    assert [(int(s), int(v)) for s, v in steps] == [(k, k) for k in range(1, STEPS + 1)]
    weights = stack.psql(f"SELECT version, status FROM weights WHERE run_id = {q} ORDER BY version")
    assert [(int(v), s) for v, s in weights if int(v) > 0] == [(k, "served") for k in range(1, STEPS + 1)]
    rollouts = stack.psql(f"SELECT status, count(*) FROM rollouts WHERE run_id = {q} GROUP BY status")
    counts = {s: int(n) for s, n in rollouts}
    assert sum(counts.values()) == STEPS * GROUP_SIZE and set(counts) <= {"graded", "failed"}, counts
    [[rewards]] = stack.psql(
        f"SELECT count(*) FROM rewards JOIN rollouts ON rollouts.id = rewards.rollout_id WHERE run_id = {q}"
    )
    assert int(rewards) == counts.get("graded", 0) > 0
    [[calls]] = stack.psql(calls_of(run_id))
    assert int(calls) > 0


def test_the_stack_comes_up_healthy(compose_stack: ComposeStack) -> None:
    health = {service: compose_stack.health(service) for service in LONG_RUNNING}
    assert health == dict.fromkeys(LONG_RUNNING, "healthy")
    migrations = compose_stack("ps", "-a", "-q", "migrations").stdout.split()
    assert len(migrations) == 1
    # The override put every service on the host network (the ports are the free ones the fixture chose).
    assert compose_stack.inspect("api")["HostConfig"]["NetworkMode"] == "host"


def test_a_run_created_through_rest_trains_to_its_last_step(compose_stack: ComposeStack) -> None:
    run_id = create_run(compose_stack, "compose-run")
    detail = wait_for_run(compose_stack, run_id)
    assert detail["status"] == "completed", f"{detail}\n{compose_stack.diagnostics()}"
    check_run_rows(compose_stack, run_id)
    # The controller started the run's learner, which noticed the run was over (it reads the status every 5 s)
    # and exited; the controller let it go.
    logs = compose_stack.logs("learners")
    assert f"started the learner of run {run_id}" in logs
    wait_until(
        lambda: f"the learner of run {run_id} exited with code 0" in compose_stack.logs("learners"),
        60,
        "the learners log to say the run's learner exited",
    )
    assert f"run {run_id} is over; learner exits" in compose_stack.logs("learners")
    assert not compose_stack.pids("learners", f"--run {run_id}")


def kill_the_learner_mid_run(stack: ComposeStack, run_id: str) -> str:
    """SIGKILL the run's learner process once its first group is complete (the learner is taking, or has taken,
    its step), from outside Docker: the controller, not Docker, restarts it. Returns what the run had done."""
    q = f"'{run_id}'"
    progress = (
        f"SELECT (SELECT count(*) FROM groups WHERE run_id = {q} AND status IN ('complete', 'consumed')), "
        f"(SELECT count(*) FROM steps WHERE run_id = {q})"
    )
    groups, steps = wait_until(
        lambda: next((row for row in stack.psql(progress) if row[0] != "0"), None),
        RUN_TIMEOUT_S,
        f"run {run_id}'s first complete group",
        every_s=0.5,
    )
    [pid] = stack.pids("learners", f"--run {run_id}")
    os.kill(pid, signal.SIGKILL)
    return f"{groups} group(s) complete, {steps} step(s) taken"


def test_two_runs_train_through_a_killed_learner_and_an_object_store_restart(
    compose_stack: ComposeStack,
) -> None:
    first, second = create_run(compose_stack, "compose-first"), create_run(compose_stack, "compose-second")
    when = kill_the_learner_mid_run(compose_stack, first)
    wait_until(
        lambda: f"the learner of run {first} died (signal 9)" in compose_stack.logs("learners"),
        60,
        "the controller to report the killed learner",
    )
    wait_until(
        lambda: (
            f"started the learner of run {first}"
            in compose_stack.logs("learners").split("died (signal 9)")[-1]
        ),
        120,
        "the controller to restart the killed learner",
    )

    # The second run samples once the first is done (one run at a time holds the inference pool).
    wait_until(
        lambda: compose_stack.psql(calls_of(second))[0][0] != "0",
        2 * RUN_TIMEOUT_S,
        "the second run's first model call",
        every_s=2,
    )
    before = objects_of(compose_stack, first) | objects_of(compose_stack, second)
    assert before and unreadable(compose_stack, before) == []
    compose_stack("restart", "minio")
    wait_until(lambda: compose_stack.health("minio") == "healthy", 120, "the restarted object store")
    assert unreadable(compose_stack, before) == [], "objects lost by restarting the object store"

    for run_id in (first, second):
        detail = wait_for_run(compose_stack, run_id)
        assert detail["status"] == "completed", f"{detail}\n{compose_stack.diagnostics()}"
        check_run_rows(compose_stack, run_id)
    after = objects_of(compose_stack, first) | objects_of(compose_stack, second)
    assert before <= after and unreadable(compose_stack, after) == []
    print(
        f"learner killed with {when}; {len(before)} objects across the object store's restart, {len(after)} in all"
    )


def test_a_killed_gateway_is_reported_restarted_and_the_run_completes(compose_stack: ComposeStack) -> None:
    run_id = create_run(compose_stack, "compose-gateway-kill")
    wait_until(
        lambda: compose_stack.psql(calls_of(run_id))[0][0] != "0",
        RUN_TIMEOUT_S,
        "the run's first model call through the gateway",
        every_s=1,
    )
    before = compose_stack.inspect("gateway")
    # The gateway process dies as in a crash, from outside Docker: the restart policy decides what follows.
    os.kill(before["State"]["Pid"], signal.SIGKILL)

    seen: list[str] = []

    def gateway_reported_down() -> bool:
        line = next(
            (ln for ln in compose_stack("ps", "-a", "gateway").stdout.splitlines() if "gateway" in ln),
            "(no line)",
        )
        seen.append(line)
        return "(healthy)" not in line

    wait_until(gateway_reported_down, 30, "`compose ps` to show the gateway not healthy", every_s=0.2)
    wait_until(
        lambda: compose_stack.health("gateway") == "healthy", 180, "the restarted gateway to be healthy"
    )
    after = compose_stack.inspect("gateway")
    assert after["Id"] == before["Id"], "the restart policy restarts the same container"
    assert after["RestartCount"] >= before["RestartCount"] + 1
    assert after["State"]["StartedAt"] != before["State"]["StartedAt"]

    detail = wait_for_run(compose_stack, run_id)
    assert detail["status"] == "completed", f"{detail}\n{compose_stack.diagnostics()}"
    check_run_rows(compose_stack, run_id)
    print("compose ps during the gateway's restart:", seen[-1])


def test_a_malformed_setting_stops_the_service_with_one_line(
    compose_stack: ComposeStack, tmp_path: Path
) -> None:
    bad = tmp_path / "bad-setting.yml"
    bad.write_text(
        "services:\n  api:\n    environment:\n      HARNESSRL_DATABASE_URL: mysql://nobody@postgres/x\n"
    )
    broken = ComposeStack(
        compose_stack.command, compose_stack.project, compose_stack.env, [*compose_stack.files, bad]
    )
    broken("up", "-d", "--no-deps", "api")

    # The service restarts (`unless-stopped`), and a restarted container reads ExitCode 0 again: judge the
    # exit code from the same inspection that saw the exit, not from a later one that can race a restart.
    exits: list[int] = []

    def exited_once() -> bool:
        state = broken.inspect("api")["State"]
        if state["Status"] in ("exited", "restarting", "dead"):
            exits.append(state["ExitCode"])
        return state["ExitCode"] == 2 and "invalid setting" in broken.logs("api")

    wait_until(exited_once, 120, "the api to exit on its bad setting")
    assert exits and set(exits) == {2}, f"the api exited with {exits}"
    lines = [ln.split("|", 1)[-1].strip() for ln in broken.logs("api").splitlines() if "|" in ln]
    lines = [ln for ln in lines if ln]
    expected = "harnessrl: invalid setting HARNESSRL_DATABASE_URL: expected postgresql+psycopg://user@host:port/dbname"
    assert lines and set(lines) == {expected}, lines
    # The rest of the stack is untouched.
    assert all(broken.health(s) == "healthy" for s in LONG_RUNNING if s != "api")


def test_the_sandbox_workers_run_under_the_seccomp_profile_without_sys_admin(
    compose_stack: ComposeStack,
) -> None:
    """The runs above went through the runner's and grader's sandboxes; those run without SYS_ADMIN and without
    ``seccomp=unconfined`` (issue 36: compose/sandbox-seccomp.json)."""
    for service in ("runner", "grader"):
        host_config = compose_stack.inspect(service)["HostConfig"]
        assert host_config["CapDrop"] == ["ALL"], host_config["CapDrop"]
        assert not {"SYS_ADMIN", "CAP_SYS_ADMIN"} & set(host_config["CapAdd"] or []), host_config["CapAdd"]
        seccomp = [opt for opt in host_config["SecurityOpt"] if opt.startswith("seccomp")]
        assert len(seccomp) == 1 and "SCMP_ACT_ERRNO" in seccomp[0], seccomp
        status = compose_stack(
            "exec", "-T", service, "grep", "-E", "^(Seccomp|CapEff):", "/proc/1/status"
        ).stdout
        fields = dict(line.split(":\t") for line in status.splitlines())
        assert fields["Seccomp"] == "2" and not int(fields["CapEff"], 16) & (1 << 21), fields  # 21: SYS_ADMIN


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            ["-e", "HARNESSRL_API_TOKEN=dev-token"],
            "harnessrl: refusing to serve the API on 0.0.0.0 with the shipped default token (dev-token)",
        ),
        (["-e", "HARNESSRL_PROFILE=production"], "harnessrl: invalid setting HARNESSRL_S3_SECRET_KEY: "),
    ],
    ids=["default-token", "shipped-secrets"],
)
def test_the_api_refuses_weak_secrets_under_compose(
    compose_stack: ComposeStack, env: list[str], expected: str
) -> None:
    refused = compose_stack(
        "run", "--rm", "--no-deps", "-T", *env, "api", "harnessrl", "serve", "api", check=False
    )
    assert refused.returncode == 2, refused
    lines = [ln for ln in (refused.stdout + refused.stderr).splitlines() if ln.startswith("harnessrl:")]
    assert len(lines) == 1 and lines[0].startswith(expected), refused


def test_down_removes_every_container_network_and_volume(compose_stack: ComposeStack) -> None:
    before = compose_stack.leftovers()
    assert before["volumes"], "the stack should hold its named volumes before `down -v`"
    compose_stack(*DOWN)
    assert compose_stack.leftovers() == {"containers": [], "networks": [], "volumes": []}
