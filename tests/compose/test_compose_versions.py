"""Which Compose reads which file: the published file with v1.29 and v2, the local override with v2 only.

Compose v1.29 (Debian's and PyPI's ``docker-compose``) hands a service's ``ports`` to docker-py, which refuses
them on the host network (``"host" network_mode is incompatible with port_bindings``), and an override cannot
remove a list in v1; so the local override, which puts the published file's services on the host network, needs
v2. Both tools come from ``scripts/install-system.sh --docker``; no engine is needed for ``config``.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.fixtures.compose import COMPOSE_DIR

pytestmark = pytest.mark.compose

PUBLISHED = COMPOSE_DIR / "docker-compose.yml"
GPU = COMPOSE_DIR / "docker-compose.gpu.yml"
LOCAL = COMPOSE_DIR / "docker-compose.local.yml"
SERVICES = [
    "postgres",
    "redis",
    "minio",
    "migrations",
    "inference",
    "gateway",
    "api",
    "runner",
    "grader",
    "learners",
]


def config(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    # In compose/: v1.29 reads the runner's seccomp profile path relative to where it runs (v2: to the file's folder).
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, cwd=COMPOSE_DIR)


@pytest.mark.parametrize("command", [["docker-compose"], ["docker", "compose"]], ids=["v1.29", "v2"])
def test_both_versions_read_the_published_file(command: list[str]) -> None:
    version = config(command, "version", "--short")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip().lstrip("v").startswith("1.29" if command == ["docker-compose"] else "2.")
    for files in (["-f", str(PUBLISHED)], ["-f", str(PUBLISHED), "-f", str(GPU)]):
        checked = config(command, *files, "config", "-q")
        assert checked.returncode == 0, checked.stderr
        services = config(command, *files, "config", "--services")
        # v1 lists every service; v2 only those of the active profiles.
        default = [*SERVICES, "learner"] if command == ["docker-compose"] else SERVICES
        assert sorted(services.stdout.split()) == sorted(default), services.stderr
        with_learner = config(command, *files, "--profile", "train", "config", "--services")
        assert sorted(with_learner.stdout.split()) == sorted([*SERVICES, "learner"]), with_learner.stderr


def test_the_project_is_named_harnessrl_by_compose_env() -> None:
    v2 = config(["docker", "compose"], "-f", str(PUBLISHED), "config", "--format", "json")
    assert '"name": "harnessrl"' in v2.stdout


def test_v2_reads_the_local_override() -> None:
    checked = config(["docker", "compose"], "-f", str(PUBLISHED), "-f", str(LOCAL), "config", "-q")
    assert checked.returncode == 0, checked.stderr
