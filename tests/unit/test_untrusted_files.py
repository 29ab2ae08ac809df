"""``shared/untrusted_files.py``: reading a file an untrusted process could have replaced never follows a link
(the file's or a parent directory's), never blocks on a fifo, never reads a device, and reads a bounded prefix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.untrusted_files import UntrustedFileError, read_untrusted

pytestmark = pytest.mark.unit


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / "d").mkdir(parents=True)
    return tmp_path / "home"


def test_a_regular_file_is_read_and_capped(home: Path) -> None:
    (home / "d" / "log").write_bytes(b"x" * 100)
    full = read_untrusted(home, "d/log", 1000)
    assert (full.data, full.truncated, full.size_bytes) == (b"x" * 100, False, 100)
    cut = read_untrusted(home, "d/log", 10)
    assert (cut.data, cut.truncated) == (b"x" * 10, True)


@pytest.mark.parametrize("target", ["/dev/zero", "/etc/passwd"])
def test_a_link_is_refused(home: Path, target: str) -> None:
    os.symlink(target, home / "d" / "log")
    with pytest.raises(UntrustedFileError, match="without following links"):
        read_untrusted(home, "d/log", 1 << 20)


def test_a_linked_parent_directory_is_refused(home: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "log").write_text("SECRET")
    os.rename(home / "d", home / "d-old")
    os.symlink(tmp_path / "secret", home / "d")
    with pytest.raises(UntrustedFileError, match="not a plain directory"):
        read_untrusted(home, "d/log", 1 << 20)


def test_a_fifo_does_not_block_and_is_refused(home: Path) -> None:
    os.mkfifo(home / "d" / "log")
    with pytest.raises(UntrustedFileError, match="not a regular file"):
        read_untrusted(home, "d/log", 1 << 20)


@pytest.mark.parametrize("relative", ["/etc/passwd", "../x", "d/../../x", ""])
def test_only_plain_relative_paths(home: Path, relative: str) -> None:
    with pytest.raises(UntrustedFileError):
        read_untrusted(home, relative, 10)
