"""The shell harness's host paths (``shared/host_paths.py``): what is refused, with a one-line reason naming the
path, and what passes."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.harnesses import harness_config
from shared.host_paths import HostPathRefused, check_shell_paths, sandbox_uid
from shared.settings import Settings

pytestmark = pytest.mark.unit


@pytest.fixture
def tmp_path() -> Iterator[Path]:  # type: ignore[override]
    """A folder the sandbox user can reach (pytest's own sits under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="harnessrl-paths-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A small read-only install prefix."""
    path = tmp_path / "agent-prefix"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "agent").write_text("#!/bin/sh\n")
    for entry in (path, path / "bin", path / "bin" / "agent"):
        entry.chmod(0o755)
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    return Settings(data_dir=data_dir)


def shell(**options: object):  # type: ignore[no-untyped-def]
    return harness_config("shell", command="agent {instruction}", **options)


def refusal(settings: Settings, **options: object) -> HostPathRefused:
    with pytest.raises(HostPathRefused) as caught:
        check_shell_paths(shell(**options), settings)
    assert "\n" not in caught.value.message
    return caught.value


@pytest.mark.parametrize("path", ["/", str(Path.home())])
def test_root_and_home_are_refused(settings: Settings, prefix: Path, path: str) -> None:
    refused = refusal(settings, mounts=[str(prefix), path])
    assert refused.field == "harness.mounts[1]" and f"mount {path} is refused" in refused.message


def test_the_data_dir_what_holds_it_and_what_is_in_it_are_refused(settings: Settings) -> None:
    inside = settings.data_dir / "objects"
    inside.mkdir()
    for path, why in (
        (settings.data_dir, "it is the data directory"),
        (settings.data_dir.parent, "it holds the data directory"),
        (inside, "it lies inside the data directory"),
    ):
        assert why in refusal(settings, mounts=[str(path)]).message
    assert "it is the data directory" in refusal(settings, home_template=str(settings.data_dir)).message


def test_missing_and_writable_paths_are_refused(settings: Settings, tmp_path: Path) -> None:
    assert "does not exist" in refusal(settings, mounts=[str(tmp_path / "nope")]).message
    writable = tmp_path / "prefix"
    (writable / "bin").mkdir(parents=True)
    writable.chmod(0o755)
    (writable / "bin").chmod(0o777)  # anyone, so the sandbox user too, may write here
    refused = refusal(settings, mounts=[str(writable)])
    assert f"writable by sandbox uid {sandbox_uid(settings)}" in refused.message and "bin" in refused.message


def test_a_read_only_prefix_and_a_small_template_pass(
    settings: Settings, tmp_path: Path, prefix: Path
) -> None:
    template = tmp_path / "template"
    (template / ".config" / "agent").mkdir(parents=True)
    (template / ".config" / "agent" / "settings.json").write_text("{}")
    for path in (tmp_path, template, template / ".config", template / ".config" / "agent"):
        path.chmod(0o755)
    if os.geteuid() == 0:  # as root the sandbox user is another uid: /usr is read-only to it
        check_shell_paths(shell(mounts=[str(prefix)], home_template=str(template)), settings)
    assert "is not a directory" in refusal(settings, home_template="/etc/hostname").message
