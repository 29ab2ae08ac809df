"""``services/grader/test_runner.py``: which patches are refused or flagged before anything runs, which commands get
the launcher, how reports are read and when they are not trusted. Real git checkouts in a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.grader.test_runner import (
    ReportError,
    base_inifile,
    launcher_args,
    pytest_section,
    read_no_follow,
    report_problem,
    screen_patch,
    suspicious_lines,
)
from shared.tasks import run_git


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "core.py").write_text("X = 1\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.pytest.ini_options]\ntestpaths = ["t"]\n'
    )
    run_git(root, "init", "-q")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "base")
    return root, run_git(root, "rev-parse", "HEAD").decode().strip()


def _screen(repo: tuple[Path, str], files: dict[str, str]) -> tuple[str | None, list[str]]:
    root, base = repo
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    screen = screen_patch(root, base, b"")
    return screen.refused, screen.suspected


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("conftest.py", "conftest.py"),
        ("pkg/deep/conftest.py", "conftest.py"),
        ("x.pth", ".pth"),
        ("pkg/sitecustomize.py", "sitecustomize"),
        ("usercustomize/__init__.py", "sitecustomize"),
        ("pytest.ini", "pytest configuration"),
        ("sub/.pytest.ini", "pytest configuration"),
        ("pytest.toml", "pytest configuration"),
        ("pytest.py", "'pytest' in the repository root"),
        ("_pytest/__init__.py", "'_pytest'"),
        ("pluggy.py", "'pluggy'"),
        ("json.py", "'json'"),
        ("xml/etree/ElementTree.py", "'xml'"),
        ("re.pyc", "'re'"),
        ("os.cpython-311-x86_64-linux-gnu.so", "'os'"),
        (
            "scripts/json.py",
            "'json' in scripts",
        ),  # a folder that is no package: pytest may put it on sys.path
    ],
)
def test_infrastructure_is_refused(repo, path: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    refused, suspected = _screen(repo, {path: "x = 1\n"})
    assert refused is not None and reason in refused, refused
    assert suspected and suspected[0].startswith("refused: ")


@pytest.mark.parametrize(
    "path",
    [
        "pkg/json.py",
        "pkg/types.py",
        "pkg/core.py",
        "README.md",
        "json.txt",
        "test/test_x.py",
        "tests/test_x.py",
    ],
)
def test_ordinary_files_are_not_refused(repo, path: str) -> None:  # type: ignore[no-untyped-def]
    refused, _ = _screen(repo, {path: "x = 1\n"})
    assert refused is None


def test_config_files_are_refused_only_when_their_pytest_section_changes(repo) -> None:  # type: ignore[no-untyped-def]
    root, _ = repo
    text = (root / "pyproject.toml").read_text()
    assert _screen(repo, {"pyproject.toml": text + "\n[tool.black]\nline-length = 100\n"})[0] is None
    refused, _ = _screen(repo, {"pyproject.toml": text.replace('["t"]', '["t"]\naddopts = "-p x"')})
    assert refused == "changes the pytest configuration in pyproject.toml"
    (root / "pyproject.toml").write_text(text)
    assert _screen(repo, {"setup.cfg": "[metadata]\nname = x\n"})[0] is None
    assert "setup.cfg" in (_screen(repo, {"setup.cfg": "[tool:pytest]\naddopts = -p x\n"})[0] or "")


def test_a_config_file_replaced_by_a_symlink_is_refused(repo) -> None:  # type: ignore[no-untyped-def]
    root, base = repo
    (root / "pyproject.toml").unlink()
    (root / "pyproject.toml").symlink_to("/etc/passwd")
    refused = screen_patch(root, base, b"").refused
    assert refused is not None and "not a plain file" in refused


def test_an_ignored_file_is_still_seen(repo) -> None:  # type: ignore[no-untyped-def]
    refused, _ = _screen(repo, {".gitignore": "conftest.py\n", "conftest.py": "x = 1\n"})
    assert refused is not None and "conftest.py" in refused


def test_patches_that_reach_into_the_framework_are_flagged() -> None:
    patch = (
        "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1,3 @@\n"
        "+import pytest\n+import sys; sys.modules['x'] = 1\n X = 1\n"
        "diff --git a/tests/test_y.py b/tests/test_y.py\n--- /dev/null\n+++ b/tests/test_y.py\n@@ -0,0 +1 @@\n"
        "+import pytest\n"
    )
    reasons = suspicious_lines(patch)
    assert "pkg/core.py: imports the test framework" in reasons
    assert "pkg/core.py: touches sys.modules" in reasons
    assert not any(r.startswith("tests/test_y.py") for r in reasons)  # a test importing pytest is ordinary


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("python -m pytest -p no:cacheprovider -q --junitxml={junit_xml}", ["-p", "no:cacheprovider", "-q"]),
        (
            "pytest tests/test_a.py -k 'not slow' --junitxml {junit_xml}",
            ["tests/test_a.py", "-k", "not slow"],
        ),
        ("python -m pytest tests/*.py --junitxml={junit_xml}", None),  # a glob: left to the shell
        ("python -m pytest tests/test_a.py -x --junit-xml={junit_xml}", ["tests/test_a.py", "-x"]),
        ("cd sub && python -m pytest --junitxml={junit_xml}", None),
        ("python -m pytest $ARGS --junitxml={junit_xml}", None),
        ("tox -e py --junitxml={junit_xml}", None),
    ],
)
def test_only_plain_pytest_commands_get_the_launcher(command: str, args: list[str] | None) -> None:
    assert launcher_args(command) == args


def test_base_inifile_follows_pytest_order(tmp_path: Path) -> None:
    assert base_inifile(tmp_path) is None
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n")
    assert base_inifile(tmp_path) is None
    (tmp_path / "tox.ini").write_text("[pytest]\n")
    assert base_inifile(tmp_path) == "tox.ini"
    (tmp_path / "pytest.ini").write_text("")
    assert base_inifile(tmp_path) == "pytest.ini"
    assert pytest_section("pyproject.toml", "[tool.pytest]\nx = 1\n") == {"x": 1}


def test_reports_are_read_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"data")
    assert read_no_follow(tmp_path, "ok", 10) == b"data"
    (tmp_path / "link").symlink_to(tmp_path / "ok")
    with pytest.raises(ReportError, match="symlink"):
        read_no_follow(tmp_path, "link", 10)
    with pytest.raises(ReportError, match="larger"):
        read_no_follow(tmp_path, "ok", 3)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ReportError, match="not a regular file"):
        read_no_follow(tmp_path, "fifo", 10)
    (tmp_path / "d").symlink_to(tmp_path)
    with pytest.raises(ReportError, match="symlink"):
        read_no_follow(tmp_path, "d/ok", 10)
    with pytest.raises(FileNotFoundError):
        read_no_follow(tmp_path, "absent", 10)


def test_untrusted_reports() -> None:
    def problem(cases, collected=None, reported=None, process=0):  # type: ignore[no-untyped-def]
        return report_problem(
            cases,
            listed_keys={"a::t", "a::forged"},
            collected_keys=collected,
            reported_exit=reported,
            process_exit=process,
            passed="passed",
        )

    assert problem([("a::t", "passed")], {"a::t"}, 0, 0) is None
    assert (
        problem([("a::t", "failed"), ("a::t", "error")], {"a::t"}, 1, 1) is None
    )  # teardown error after a fail
    assert "2 times" in (problem([("a::t", "passed"), ("a::t", "passed")]) or "")
    assert "never collected" in (problem([("a::forged", "passed")], {"a::t"}, 0, 0) or "")
    assert "never collected" in (problem([("a::forged[1]", "passed")], {"a::t"}, 0, 0) or "")
    assert problem([("README.rst::README.rst", "passed")], {"a::t"}, 0, 0) is None  # not listed: cannot count
    contradicted = report_problem(
        [("a::t", "passed")],
        listed_keys={"a::t"},
        collected_keys={"a::t"},
        runner_outcomes={"a::t": "failed"},
        reported_exit=1,
        process_exit=1,
        passed="passed",
    )
    assert "pytest's reports said otherwise" in (contradicted or "")
    assert "exit status" in (problem([("a::t", "passed")], {"a::t"}, 0, 1) or "")
    assert "lists failures" in (problem([("a::t", "failed")], {"a::t"}, 0, 0) or "")
