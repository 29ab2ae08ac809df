"""The drift check's report (``scripts/harness_versions_report.py``) fails a harness whose package has a successor
— declared in ``scripts/install-harnesses.sh --successors`` or named in npm's deprecation message — and says
where it moved; and no pin is left on a package that the successors list says has moved."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "scripts" / "harness_versions_report.py"
PASSED_JUNIT = (
    "<testsuite><testcase name='test_real_cli_multi_turn_task_forms_one_exact_chain[{harness}]'/></testsuite>"
)


def load_report_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("harness_versions_report", REPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("deprecated", "declared", "note"),
    [
        ("", "", None),
        ("", "@new/agent", "moved to `@new/agent`"),
        ("This package has moved to @new/agent", "", "moved to `@new/agent`"),
        ("Renamed to new-agent.", "", "moved to `new-agent`"),
        ("No longer maintained. Use `new-agent` instead", "", "moved to `new-agent`"),
        ("Deprecated in favor of '@new/agent'.", "", "moved to `@new/agent`"),
        # No successor named: still reported, with npm's words.
        ("Use at your own risk", "", "deprecated: Use at your own risk"),
        ("moved to https://example.org/agent", "", "deprecated: moved to https://example.org/agent"),
        ("@old/agent is unsupported", "", "deprecated: @old/agent is unsupported"),
    ],
)
def test_successor_note(deprecated: str, declared: str, note: str | None) -> None:
    assert load_report_module().successor_note("@old/agent", deprecated, declared) == note


def run_report(tmp_path: Path, rows: list[str], harness: str) -> subprocess.CompletedProcess[str]:
    versions = tmp_path / "versions.tsv"
    versions.write_text("".join(f"{row}\n" for row in rows))
    junit = tmp_path / "junit.xml"
    junit.write_text(PASSED_JUNIT.format(harness=harness))
    return subprocess.run(
        [sys.executable, str(REPORT), str(versions), str(junit), str(tmp_path / "chain.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_moved_package_fails_the_check_even_when_its_test_passes(tmp_path: Path) -> None:
    old_pi = "pi\t@mariozechner/pi-coding-agent\t0.73.1\t0.73.1\tok\t\t@earendil-works/pi-coding-agent"
    result = run_report(tmp_path, [old_pi], "pi")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0.73.1 (= pinned), **moved to `@earendil-works/pi-coding-agent`**" in result.stdout
    assert "| **PASS** |" in result.stdout
    assert (
        "- **pi**: `@mariozechner/pi-coding-agent` moved to `@earendil-works/pi-coding-agent`"
        in result.stdout
    )


def test_a_deprecated_package_fails_and_a_current_one_passes(tmp_path: Path) -> None:
    deprecated = "codex\t@openai/codex\t0.171.0\t0.172.0\tok\tuse @openai/codex-cli instead\t"
    result = run_report(tmp_path, [deprecated], "codex")
    assert result.returncode == 1 and "**moved to `@openai/codex-cli`**" in result.stdout, result.stdout
    current = "codex\t@openai/codex\t0.171.0\t0.172.0\tok\t\t"
    result = run_report(tmp_path, [current], "codex")
    assert result.returncode == 0 and "moved" not in result.stdout, result.stdout


def test_a_row_of_the_old_shape_is_refused_with_its_columns(tmp_path: Path) -> None:
    result = run_report(tmp_path, ["pi\t@earendil-works/pi-coding-agent\t1.6.0\t1.6.0\tok"], "pi")
    assert result.returncode == 1
    assert (
        "needs 7 tab-separated fields (harness, package, pinned, newest, install, deprecated, successor)"
        in (result.stderr)
    )


def install_script(*args: str) -> list[list[str]]:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-harnesses.sh"), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split() for line in out.splitlines()]


def test_no_pin_is_on_a_package_that_moved() -> None:
    pinned = {pin[2] for pin in install_script("--list")}
    moves = install_script("--successors")
    assert moves, "the successors list is empty"
    assert all(len(move) == 2 for move in moves), moves
    assert not pinned & {old for old, _new in moves}, (pinned, moves)
    # Pi followed its move, onto the Node its new releases need.
    [pi] = [pin for pin in install_script("--list") if pin[0] == "pi"]
    assert pi[2] == "@earendil-works/pi-coding-agent" and pi[5] == "node22", pi
