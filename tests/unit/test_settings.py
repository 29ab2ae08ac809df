"""Settings: defaults that work, and malformed values stop the start with one line naming the setting."""

import os
import subprocess
import sys

import pytest

from shared.settings import Settings, SettingsError, load_settings

pytestmark = pytest.mark.unit


def test_defaults_are_valid() -> None:
    s = load_settings(_env_file=None)
    assert s.database_url.startswith("postgresql")
    assert s.resolved_inference_urls == [f"http://127.0.0.1:{s.inference_port}"]
    assert s.resolved_visibility_timeout_s > max(s.rollout_timeout_s, s.grading_timeout_s)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"database_url": "mysql://x/y"}, "HARNESSRL_DATABASE_URL"),
        ({"database_url": "not a url"}, "HARNESSRL_DATABASE_URL"),
        ({"redis_url": "http://127.0.0.1:6379"}, "HARNESSRL_REDIS_URL"),
        ({"object_store_url": "ftp://bucket"}, "HARNESSRL_OBJECT_STORE_URL"),
        ({"object_store_url": "s3://"}, "HARNESSRL_OBJECT_STORE_URL"),
        ({"object_store_url": "file://relative/dir"}, "HARNESSRL_OBJECT_STORE_URL"),
        ({"rollout_timeout_s": -5}, "HARNESSRL_ROLLOUT_TIMEOUT_S"),
        ({"sandbox_memory_bytes": 0}, "HARNESSRL_SANDBOX_MEMORY_BYTES"),
        ({"max_policy_lag": -1}, "HARNESSRL_MAX_POLICY_LAG"),
        ({"api_port": 70000}, "HARNESSRL_API_PORT"),
        ({"inference_urls": ["localhost:8000"]}, "HARNESSRL_INFERENCE_URLS"),
    ],
)
def test_malformed_setting_names_the_setting(overrides: dict, named: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None, **overrides)
    message = str(info.value)
    assert named in message
    assert "\n" not in message


def test_visibility_timeout_must_exceed_longest_task() -> None:
    with pytest.raises(SettingsError, match="task_visibility_timeout_s"):
        load_settings(_env_file=None, rollout_timeout_s=100, task_visibility_timeout_s=50)


def test_cli_refuses_to_start_with_one_line() -> None:
    env = {"HARNESSRL_OBJECT_STORE_URL": "gopher://x", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "db", "upgrade"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "HARNESSRL_OBJECT_STORE_URL" in lines[0] and "gopher" in lines[0]


def test_runner_concurrency_defaults_to_the_cores_within_two_to_eight() -> None:
    from shared.settings import default_runner_concurrency

    assert [default_runner_concurrency(n) for n in (None, 1, 2, 6, 64)] == [2, 2, 2, 6, 8]
    assert Settings(_env_file=None).runner_concurrency == default_runner_concurrency(os.cpu_count())  # type: ignore[call-arg]
