"""``compose/docker-compose.yml`` validated without a Docker engine (docs/design.md#deployment).

Three layers, each of which catches what the others miss: the compose-spec JSON schema (``check-jsonschema
--builtin-schema vendor.compose-spec``: unknown keys, wrong types, bad ``depends_on`` conditions), the Rust
``compose-spec`` parser (durations, image references, port syntax) on the interpolated file, and name checks
neither tool does (every ``depends_on`` target and named volume exists, every ``HARNESSRL_*`` variable is a
real setting, every ``harnessrl`` command is a registered CLI command, one image built once). Each check is
also run on a broken copy to prove it can fail.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import compose_spec
import pytest
import yaml

from services.cli.main import COMMANDS, SERVE, WORKER
from shared.settings import Settings
from tests.fixtures.services import REPO_ROOT

pytestmark = pytest.mark.unit

COMPOSE_FILE = REPO_ROOT / "compose" / "docker-compose.yml"
LOCAL_FILE = REPO_ROOT / "compose" / "docker-compose.local.yml"
GPU_FILE = REPO_ROOT / "compose" / "docker-compose.gpu.yml"
DOCKERFILE = REPO_ROOT / "compose" / "Dockerfile"
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")
LONG_RUNNING = {
    "postgres",
    "redis",
    "minio",
    "inference",
    "gateway",
    "api",
    "runner",
    "grader",
    "learners",
}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable interpolation: ``${V}``, ``${V:-default}``, ``${V-default}``, ``${V:?err}``, ``$$``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg") or ""
        value = env.get(name)
        if op in (":-", "-"):
            return value if value or (op == "-" and value is not None) else arg
        if op in (":?", "?"):
            if not value:
                raise ValueError(f"required variable {name} is missing: {arg}")
            return value
        return value or ""

    pattern = r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?)(?P<arg>[^}]*))?\}"
    return re.sub(pattern, replace, text)


def load(text: str) -> dict[str, Any]:
    return yaml.safe_load(interpolate(text, {}))


def parse_with_compose_spec(text: str) -> None:
    # The Rust parser has no YAML merge keys (``<<: *anchor``); PyYAML resolves them, as Docker Compose does.
    compose_spec.PyCompose.from_yaml(yaml.safe_dump(load(text), sort_keys=False))


def name_problems(compose: dict[str, Any]) -> list[str]:
    """References the schema cannot check: services, volumes, settings, CLI commands, the one image."""
    problems = []
    services: dict[str, Any] = compose["services"]
    volumes = set(compose.get("volumes") or {})
    settings = {f"HARNESSRL_{name.upper()}" for name in Settings.model_fields}
    built = [name for name, svc in services.items() if "build" in svc]
    if len(built) != 1:
        problems.append(f"exactly one service must build the image, found {built}")
    image = services[built[0]].get("image") if built else None
    for name, svc in services.items():
        for target in svc.get("depends_on") or {}:
            if target not in services:
                problems.append(f"{name}: depends_on undefined service {target!r}")
        for mount in svc.get("volumes") or []:
            source = mount.split(":", 1)[0] if isinstance(mount, str) else mount.get("source", "")
            if source and not source.startswith((".", "/", "~")) and source not in volumes:
                problems.append(f"{name}: volume {source!r} is not declared")
        for key in svc.get("environment") or {}:
            if key.startswith("HARNESSRL_") and key not in settings:
                problems.append(f"{name}: {key} is not a setting in shared/settings.py")
        command = svc.get("command") or []
        if isinstance(command, list) and command[:1] == ["sh"]:
            command = command[-1].removeprefix("exec ").split()
        if command[:1] == ["harnessrl"]:
            group = {"serve": SERVE, "worker": WORKER}.get(command[1])
            known = group if group is not None else COMMANDS
            sub = command[2] if group is not None else command[1]
            if sub not in known:
                problems.append(f"{name}: `{' '.join(command[:3])}` is not a registered harnessrl command")
        if str(svc.get("image", "")).startswith("harnessrl") and svc.get("image") != image:
            problems.append(f"{name}: uses image {svc.get('image')!r}, not the one built ({image!r})")
        if name in LONG_RUNNING and "healthcheck" not in svc:
            problems.append(f"{name}: long-running service without a healthcheck")
    return problems


def _schema_errors(path: Path) -> str:
    result = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def test_compose_file_matches_the_compose_spec_schema() -> None:
    assert _schema_errors(COMPOSE_FILE) == ""


def test_compose_file_parses_with_compose_spec() -> None:
    parse_with_compose_spec(COMPOSE_FILE.read_text())


def test_every_reference_in_the_compose_file_exists() -> None:
    assert name_problems(load(COMPOSE_FILE.read_text())) == []


def test_the_stack_has_every_service_with_health_gated_startup() -> None:
    services = load(COMPOSE_FILE.read_text())["services"]
    assert LONG_RUNNING | {"migrations", "learner"} == set(services)
    for name in ("api", "gateway", "runner", "grader", "learners", "learner"):
        assert services[name]["depends_on"]["migrations"]["condition"] == "service_completed_successfully"
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrations"]["command"] == ["harnessrl", "db", "upgrade"]
    assert services["gateway"]["depends_on"]["inference"]["condition"] == "service_healthy"
    assert services["learner"]["profiles"] == ["train"]
    assert [name for name, svc in services.items() if "profiles" in svc] == ["learner"]
    assert "replicas" not in services["runner"].get("deploy", {})  # scalable with --scale runner=N


def test_compose_v1_can_read_the_file() -> None:
    """Compose v1.29 rejects a top-level ``name`` and optional (``required: false``) dependencies."""
    compose = load(COMPOSE_FILE.read_text())
    assert "name" not in compose
    for svc in compose["services"].values():
        for condition in (svc.get("depends_on") or {}).values():
            assert set(condition) == {"condition"}, condition
    env_lines = [
        ln for ln in (REPO_ROOT / "compose" / ".env").read_text().splitlines() if not ln.startswith("#")
    ]
    assert env_lines == ["COMPOSE_PROJECT_NAME=harnessrl", "HARNESSRL_PROFILE=dev"]


def test_the_gpu_file_only_adds_gpus_and_the_cuda_build() -> None:
    base = load(COMPOSE_FILE.read_text())["services"]
    gpu = load(GPU_FILE.read_text())["services"]
    assert gpu["migrations"] == {"build": {"args": {"VLLM_DEVICE": "cuda"}}}
    assert base["migrations"]["build"]["args"]["VLLM_DEVICE"] == "cpu"
    for name in ("inference", "learners", "learner"):
        assert set(gpu[name]) == {"deploy"}
        device = gpu[name]["deploy"]["resources"]["reservations"]["devices"][0]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert set(gpu) == {"migrations", "inference", "learners", "learner"}


def test_the_local_override_changes_images_and_networking_only() -> None:
    """compose/docker-compose.local.yml runs the published file itself: it may swap each image and move each
    service onto the host network, nothing else."""
    base = load(COMPOSE_FILE.read_text())
    local = load(LOCAL_FILE.read_text())
    assert {key for key in local if not key.startswith("x-")} == {"services"}
    assert set(local["services"]) == set(base["services"]), "every service runs on the host network"
    for name, svc in local["services"].items():
        assert set(svc) == {"image", "network_mode", "extra_hosts"}, name
        assert svc["network_mode"] == "host"
        assert svc["image"].startswith("harnessrl-local/"), svc["image"]
    # The names in the settings resolve on the host network too.
    hosts = {entry.split(":")[0] for entry in local["services"]["api"]["extra_hosts"]}
    env = base["x-harnessrl-env"]
    for key in ("HARNESSRL_DATABASE_URL", "HARNESSRL_REDIS_URL", "HARNESSRL_INFERENCE_URLS"):
        host = re.search(r"[@/]([a-z-]+):\d+", env[key])
        assert host and host.group(1) in hosts, (key, env[key])
    assert env["HARNESSRL_S3_ENDPOINT"].split(":")[0] in hosts
    # Every local image is one compose/local/build.sh builds.
    build_script = (REPO_ROOT / "compose" / "local" / "build.sh").read_text()
    for svc in local["services"].values():
        assert re.search(rf"build {re.escape(svc['image'])} ", build_script), svc["image"]


@pytest.mark.parametrize("path", ["docker-compose.local.yml", "docker-compose.gpu.yml"])
def test_the_override_files_match_the_schema(path: str) -> None:
    assert _schema_errors(REPO_ROOT / "compose" / path) == ""


def test_the_image_installs_every_bundled_dataset_file() -> None:
    """The image installs the project as a wheel (not editable): a bundled task repository file that no
    package-data pattern covers is missing there, and the task's base_commit no longer matches."""
    import tomllib
    from fnmatch import fnmatch

    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["*"]
    missing = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "shared" / "datasets").rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix != ".py"
        and not any(fnmatch(path.name, pattern) for pattern in patterns)
    ]
    assert missing == []


def test_dockerfile_copies_only_what_exists() -> None:
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO_ROOT / source).exists(), line


BROKEN = [
    (
        'depends_on:\n      postgres:\n        condition: service_healthy\n    restart: "no"',
        'depends_on:\n      postgres:\n        condition: service_happy\n    restart: "no"',
        "schema",
    ),
    (
        '    healthcheck:\n      test: ["CMD", "redis-cli",',
        '    helthcheck:\n      test: ["CMD", "redis-cli",',
        "schema",
    ),
    (
        "      interval: 5s\n      timeout: 3s\n      retries: 20\n      start_period: 10s",
        "      interval: 5 seconds\n      timeout: 3s\n      retries: 20\n      start_period: 10s",
        "parser",
    ),
    (
        "    depends_on:\n      <<: *needs-state\n      gateway:",
        "    depends_on:\n      <<: *needs-state\n      gatewy:",
        "names",
    ),
    ("    - gateway-socket:/run/harnessrl", "    - gateway-sock:/run/harnessrl", "names"),
    ("  HARNESSRL_DATA_DIR: /data", "  HARNESSRL_DATA_DIRECTORY: /data", "names"),
    ('command: ["harnessrl", "serve", "api"]', 'command: ["harnessrl", "serve", "apii"]', "names"),
]


@pytest.mark.parametrize(("good", "bad", "layer"), BROKEN, ids=[b[1].strip()[:30] for b in BROKEN])
def test_each_layer_catches_its_kind_of_mistake(tmp_path: Path, good: str, bad: str, layer: str) -> None:
    text = COMPOSE_FILE.read_text()
    assert good in text, "the broken variant no longer applies; update it"
    broken = text.replace(good, bad, 1)
    path = tmp_path / "docker-compose.yml"
    path.write_text(broken)
    if layer == "schema":
        assert _schema_errors(path) != ""
    elif layer == "parser":
        with pytest.raises(ValueError, match="duration"):
            parse_with_compose_spec(broken)
    else:
        assert name_problems(load(broken)) != []


def test_interpolation_follows_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("${SET} ${UNSET} ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} $$HOME", env) == "v  d d  $HOME"
    with pytest.raises(ValueError, match="RUN_ID"):
        interpolate("${RUN_ID:?set it}", env)
