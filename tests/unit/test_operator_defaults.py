"""Operator defaults without a process or an engine: which binds and tokens ``check_api_exposure`` refuses, which
secrets ``check_shipped_secrets`` refuses outside the dev profile, and the compose file's sandbox workers (the
seccomp profile instead of ``unconfined``, no SYS_ADMIN, the profile's allow and deny lists). The CLI and a real
stack are driven in ``tests/security/test_operator_defaults.py`` and ``tests/compose``."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from shared.settings import (
    DEFAULT_API_TOKEN,
    Settings,
    SettingsError,
    check_api_exposure,
    check_shipped_secrets,
    is_loopback_host,
    load_settings,
)
from tests.fixtures.services import REPO_ROOT

pytestmark = pytest.mark.unit

COMPOSE_DIR = REPO_ROOT / "compose"
PROFILE = json.loads((COMPOSE_DIR / "sandbox-seccomp.json").read_text())
sys.path.insert(0, str(COMPOSE_DIR))
import sandbox_seccomp  # noqa: E402 - compose/ is not a package

LONG_TOKEN = "x" * 16


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_binds_keep_any_token(host: str) -> None:
    assert is_loopback_host(host)
    check_api_exposure(host, DEFAULT_API_TOKEN)
    check_api_exposure(host, "a")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.0.0.5", "api.example.org", "127.0.0.1.nip.io"])
def test_other_binds_need_a_long_token_that_is_not_the_default(host: str) -> None:
    assert not is_loopback_host(host)
    for token in (DEFAULT_API_TOKEN, "", "x" * 15):
        with pytest.raises(SettingsError, match="refusing to serve the API on"):
            check_api_exposure(host, token)
    check_api_exposure(host, LONG_TOKEN)


def shipped(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "api_token": LONG_TOKEN,
        "object_store_url": "s3://harnessrl",
        "s3_secret_key": "operator-secret",
        "database_url": "postgresql+psycopg://harnessrl:operator-pw@postgres:5432/harnessrl",
        "_env_file": None,
    }
    return Settings(**{**values, **overrides})


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"api_token": DEFAULT_API_TOKEN}, "HARNESSRL_API_TOKEN"),
        ({"api_token": "short"}, "HARNESSRL_API_TOKEN"),
        ({"s3_secret_key": "minioadmin"}, "HARNESSRL_S3_SECRET_KEY"),
        ({"s3_secret_key": "harnessrl-secret"}, "HARNESSRL_S3_SECRET_KEY"),
        ({"database_url": "postgresql+psycopg://harnessrl:harnessrl@postgres/h"}, "HARNESSRL_DATABASE_URL"),
        ({"database_url": "postgresql+psycopg://postgres:postgres@db/h"}, "HARNESSRL_DATABASE_URL"),
    ],
)
def test_production_refuses_each_shipped_secret_and_dev_accepts_it(
    overrides: dict[str, str], setting: str
) -> None:
    check_shipped_secrets(shipped(profile="production"))  # the operator's own secrets pass
    with pytest.raises(SettingsError, match=f"^invalid setting {setting}: .* in profile production"):
        check_shipped_secrets(shipped(profile="production", **overrides))
    check_shipped_secrets(shipped(profile="dev", **overrides))


def test_production_ignores_s3_keys_when_objects_live_in_files() -> None:
    check_shipped_secrets(
        shipped(profile="production", object_store_url="file://", s3_secret_key="minioadmin")
    )


def test_the_default_profile_is_dev_and_load_settings_applies_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("HARNESSRL_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(REPO_ROOT / "tests")  # no .env here
    assert load_settings().profile == "dev"
    monkeypatch.setenv("HARNESSRL_PROFILE", "production")
    with pytest.raises(SettingsError, match="HARNESSRL_API_TOKEN"):
        load_settings()


def compose() -> dict[str, Any]:
    text = (COMPOSE_DIR / "docker-compose.yml").read_text()
    return dict(yaml.safe_load(text.replace("$$", "$")))


@pytest.mark.parametrize("service", ["runner", "grader"])
def test_the_sandbox_workers_hold_no_sys_admin_and_run_under_the_profile(service: str) -> None:
    svc = compose()["services"][service]
    assert svc["cap_drop"] == ["ALL"]
    assert set(svc["cap_add"]) == {"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID", "SETPCAP"}
    assert "seccomp=./sandbox-seccomp.json" in svc["security_opt"]
    assert not [opt for opt in svc["security_opt"] if opt.startswith("seccomp") and "unconfined" in opt]
    assert "no-new-privileges:true" in svc["security_opt"]
    for name, other in compose()["services"].items():
        assert "SYS_ADMIN" not in (other.get("cap_add") or []), name
        assert "seccomp=unconfined" not in (other.get("security_opt") or []), name


def test_compose_defaults_to_production_and_its_env_file_opts_into_dev() -> None:
    env = compose()["x-harnessrl-env"]
    assert env["HARNESSRL_PROFILE"] == "${HARNESSRL_PROFILE:-production}"
    assert "${POSTGRES_PASSWORD:-harnessrl}" in env["HARNESSRL_DATABASE_URL"]
    assert (
        compose()["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
        == "${POSTGRES_PASSWORD:-harnessrl}"
    )
    assert "HARNESSRL_PROFILE=dev" in (COMPOSE_DIR / ".env").read_text().splitlines()


def test_the_seccomp_profile_allows_bwrap_s_namespaces_and_denies_the_rest_of_the_list() -> None:
    assert PROFILE["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {
        name for rule in PROFILE["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]
    }
    assert {rule["action"] for rule in PROFILE["syscalls"]} == {"SCMP_ACT_ALLOW"}
    assert not any(
        rule.get("args") or rule.get("includes") or rule.get("excludes") for rule in PROFILE["syscalls"]
    )
    assert set(sandbox_seccomp.BWRAP_NAMESPACE_CALLS) <= allowed
    denied = {name for names in sandbox_seccomp.DENIED.values() for name in names}
    for must_deny in (
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "keyctl",
        "io_uring_setup",
        "open_by_handle_at",
    ):
        assert must_deny in denied
    assert not denied & allowed
    for ordinary in ("read", "execve", "openat", "socket", "prctl", "seccomp", "chroot", "wait4", "clone"):
        assert ordinary in allowed
    assert [entry["subArchitectures"] for entry in PROFILE["archMap"]] == [[], []]  # no 32-bit compat calls
    assert sandbox_seccomp.profile(set(PROFILE["syscalls"][1]["names"])) == PROFILE


def test_the_committed_profile_is_what_the_generator_writes() -> None:
    if not all(header.exists() for header in sandbox_seccomp.HEADERS):
        pytest.fail("the kernel headers (linux-libc-dev) are missing: apt-get install linux-libc-dev")
    check = subprocess.run([sys.executable, str(COMPOSE_DIR / "sandbox_seccomp.py"), "--check"], check=False)
    assert check.returncode == 0, (
        "compose/sandbox-seccomp.json is stale: run python3 compose/sandbox_seccomp.py"
    )
