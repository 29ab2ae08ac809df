"""End-to-end fixtures of the runner: the real gateway as its own process (TCP + Unix socket) in front of an
upstream, whose ``.settings`` point the runner at that gateway's socket, and a bundled task with scripts that solve
or fail it. (``sandbox`` comes from ``tests/fixtures/rollouts.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.settings import Settings
from tests.fixtures.services import REPO_ROOT, free_port, stop_process, wait_for_port


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    port: int
    socket: Path
    log: Path
    settings: Settings  # the test settings with this gateway's socket and port

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return [int(pid) for pid in children]


def start_gateway(
    settings: Settings,
    settings_env: dict[str, str],
    upstream_url: str,
    model_dir: Path,
    workdir: Path,
    max_model_len: int = 131072,
    workers: int = 1,
) -> GatewayProcess:
    """``harnessrl serve gateway --workers N`` in its own session, serving ``model_dir``'s chat format, sampling
    upstream. ``proc`` is the supervisor; the workers are its children (``worker_pids``).

    The context limit is raised by default: the CLIs' system prompts and tool schemas alone are 10-30k tokens of
    the tiny tokenizer, and the scripted policy has no context limit of its own.
    """
    port = free_port()
    socket = workdir / f"gateway-{port}.sock"
    log = workdir / f"gateway-{port}.log"
    env = settings_env | {
        "HARNESSRL_GATEWAY_PORT": str(port),
        "HARNESSRL_GATEWAY_SOCKET": str(socket),
        "HARNESSRL_INFERENCE_URLS": json.dumps([upstream_url]),
        "HARNESSRL_MODEL_DIR": str(model_dir),
        "HARNESSRL_API_PORT": str(free_port()),
        "HARNESSRL_MAX_MODEL_LEN": str(max_model_len),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "serve", "gateway", "--workers", str(workers)],
        env=env,
        cwd=REPO_ROOT,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, 120, proc)
        from services.runner.infrastructure import gateway_answers

        # the supervisor binds at once; a worker answers once it has loaded the chat format
        deadline = time.monotonic() + 120
        while not gateway_answers(socket) and time.monotonic() < deadline:
            time.sleep(0.1)
    except (RuntimeError, TimeoutError) as exc:
        stop_process(proc)
        raise RuntimeError(
            f"gateway did not start: {exc}\n{log.read_text(errors='replace')[-3000:]}"
        ) from None
    gateway_settings = settings.model_copy(update={"gateway_socket": socket, "gateway_port": port})
    return GatewayProcess(proc, port, socket, log, gateway_settings)


@pytest.fixture(scope="session")
def dead_upstream_gateway(settings, settings_env, tiny_model_dir, data_dir) -> Iterator[GatewayProcess]:  # type: ignore[no-untyped-def]
    """A gateway whose inference upstream is down: every model call is answered with a retryable error."""
    gateway = start_gateway(
        settings, settings_env, f"http://127.0.0.1:{free_port()}", tiny_model_dir, data_dir
    )
    yield gateway
    stop_process(gateway.proc)


@pytest.fixture(scope="session")
def scripted_gateway(settings, settings_env, tiny_model_dir, data_dir, scripted_policy_server):  # type: ignore[no-untyped-def]
    """A gateway process sampling from the scripted policy (``scripted_policy`` sets the script per test)."""
    gateway = start_gateway(settings, settings_env, scripted_policy_server.url, tiny_model_dir, data_dir)
    yield gateway
    stop_process(gateway.proc)


@dataclass(frozen=True)
class SolvableTask:
    """A bundled task and two scripts for the scripted policy: one reads the file and writes the reference solution
    through the harness's own tools (Claude Code refuses to overwrite a file it has not read), the other looks
    around and gives up. Their first steps differ, as the policy's rotation of scripts needs."""

    task: object  # shared.tasks.Task
    solved_path: str
    solve_script: list[dict[str, object]]
    fail_script: list[dict[str, object]]


@pytest.fixture(scope="session")
def solvable_task(tmp_path_factory) -> SolvableTask:  # type: ignore[no-untyped-def]
    from shared.datasets import load_dataset, reference_patch
    from shared.tasks import materialize, patch_paths

    task = next(t for t in load_dataset("swe_mini") if t.instance_id == "textkit-1")
    patch = reference_patch("swe_mini", task.instance_id)
    [path] = patch_paths(patch)
    repo = materialize(task, tmp_path_factory.mktemp("solved") / "repo")
    subprocess.run(["git", "apply", "-"], cwd=repo, input=patch.encode(), check=True)
    solve = [
        {"read": path},
        {"write": {"path": path, "content": (repo / path).read_text()}},
        {"say": "Fixed."},
    ]
    fail = [{"run": "ls"}, {"say": "I could not find the problem."}]
    return SolvableTask(task, path, solve, fail)
