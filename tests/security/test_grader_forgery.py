"""Issue 36, item 2: test results the tested code cannot forge. Each attack leaves the bug in ``greet.py``
untouched and tries to make the grader read a junit report in which every test passes: a module that shadows the
test runner or the standard library, a ``conftest.py``, a ``.pth``, ``sitecustomize``, pytest configuration in any
file pytest reads, and the tested code itself writing a forged report (where the report used to be, where it might
be now, or as a symlink). Each runs through the real runner, sandbox and grader (``attack``); each earned reward 1.0
(or was graded as an ordinary patch) on 4f1089c.

After the fix: infrastructure files are refused before anything runs (reward 0, outcome ``patch_refused``, the
reason recorded), the tested code's forgeries land nowhere the grader reads (reward 0), and both are flagged in
``rewards.reward_hack_suspected`` — asserted with SQL, the way an operator would look."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from shared.db import session_scope

pytestmark = [pytest.mark.e2e]

FORGED_JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" '
    'skipped="0" tests="1"><testcase classname="tests.test_greet" name="test_greet" time="0.001"/></testsuite>'
    "</testsuites>"
)

# Registers an exit handler that writes an all-passing report everywhere a report could be: the path pytest was
# given, where the grader used to read it, every file in HOME (the launcher's report format included).
PAYLOAD = f"""import atexit, json, os, sys
FORGED = {FORGED_JUNIT!r}
def _targets():
    out = ["/workspace/.harnessrl-junit.xml"]
    for i, arg in enumerate(sys.argv):
        if arg.startswith("--junitxml="):
            out.append(arg.split("=", 1)[1])
        elif arg == "--junitxml" and i + 1 < len(sys.argv):
            out.append(sys.argv[i + 1])
    home = os.path.expanduser("~")
    try:
        out += [os.path.join(home, name) for name in os.listdir(home)]
    except OSError:
        pass
    return out
def _forge():
    for path in _targets():
        body = FORGED
        if path.endswith(".json"):
            body = json.dumps({{"format": "harnessrl-pytest-report/1", "exit_code": 0,
                                "collected": ["tests/test_greet.py::test_greet"], "junit": FORGED}})
        try:
            with open(path, "w") as f:
                f.write(body)
        except OSError:
            pass
atexit.register(_forge)
"""

BUGGY_GREET = "def greet():\n    return 'helo'\n"


def _write(files: dict[str, str]) -> str:
    """A shell script that writes ``files`` (path -> content) into the workspace."""
    lines = []
    for path, content in files.items():
        if "/" in path:
            lines.append(f"mkdir -p {path.rsplit('/', 1)[0]}")
        lines.append(f"cat > {path} <<'HARNESSRL_EOF'\n{content}HARNESSRL_EOF")
    return "\n".join(lines)


def _reward_flags(db: Any, rollout_id: str) -> dict[str, Any]:
    with session_scope(db) as session:
        row = (
            session.execute(
                text(
                    "SELECT reward, outcome, reward_hack_suspected, reward_hack_reason FROM rewards "
                    "WHERE rollout_id = :r"
                ),
                {"r": rollout_id},
            )
            .mappings()
            .one()
        )
        suspected = session.execute(
            text("SELECT count(*) FROM rewards WHERE reward_hack_suspected AND rollout_id = :r"),
            {"r": rollout_id},
        ).scalar_one()
    return {**row, "found_by_flag": suspected == 1}


def _assert_refused(result: Any, db: Any, reason_part: str) -> None:
    assert result.status == "graded", result
    assert result.reward == 0.0, result  # not 1.0: no forged pass
    assert result.outcome == "unresolved" and result.outcome_reason == "patch_refused", result
    row = _reward_flags(db, result.rollout_id)
    assert row["outcome"] == "patch_refused", row
    assert row["reward_hack_suspected"] and row["found_by_flag"], row
    assert reason_part in row["reward_hack_reason"], row
    assert set(result.reward_row["tests"]["FAIL_TO_PASS"].values()) == {"missing"}  # nothing ran


@pytest.mark.parametrize(
    "files",
    [
        {"pytest.py": PAYLOAD},
        {"pytest/__init__.py": PAYLOAD, "pytest/__main__.py": "\n"},
    ],
    ids=["pytest.py", "pytest-package"],
)
def test_a_module_shadowing_the_test_runner_is_refused(attack, toy_task, db, files) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, _write(files))
    _assert_refused(result, db, "'pytest' in the repository root")


@pytest.mark.parametrize(
    "files",
    [
        {"xml/__init__.py": PAYLOAD, "xml/etree/__init__.py": "\n"},
        {"json.py": PAYLOAD},
        {"argparse.py": PAYLOAD},
    ],
    ids=["xml-package", "json.py", "argparse.py"],
)
def test_a_module_shadowing_the_standard_library_is_refused(attack, toy_task, db, files) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, _write(files))
    module = next(iter(files)).split("/")[0].removesuffix(".py")
    _assert_refused(result, db, f"{module!r} in the repository root")


@pytest.mark.parametrize("path", ["conftest.py", "sub/conftest.py"])
def test_a_conftest_anywhere_is_refused(attack, toy_task, db, path) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, _write({path: PAYLOAD}))
    _assert_refused(result, db, f"conftest.py is test infrastructure: {path}")


@pytest.mark.parametrize(
    ("config", "content"),
    [
        ("pytest.ini", "[pytest]\naddopts = -p forge_plugin\n"),
        ("tox.ini", "[pytest]\naddopts = -p forge_plugin\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = -p forge_plugin\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p forge_plugin"\n'),
    ],
)
def test_pytest_configuration_in_any_file_is_refused(attack, toy_task, db, config, content) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, _write({"forge_plugin.py": PAYLOAD, config: content}))
    _assert_refused(result, db, config)


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (
            {"forge_plugin.py": PAYLOAD, "harnessrl.pth": "import forge_plugin\n"},
            ".pth files run at interpreter",
        ),
        ({"sitecustomize.py": PAYLOAD}, "sitecustomize/usercustomize run at interpreter start"),
        ({"lib/usercustomize.py": PAYLOAD}, "sitecustomize/usercustomize run at interpreter start"),
    ],
    ids=["pth", "sitecustomize", "usercustomize"],
)
def test_interpreter_startup_files_are_refused(attack, toy_task, db, files, reason) -> None:  # type: ignore[no-untyped-def]
    # On 4f1089c these files were inert (no site folder is in the repository) but graded like any patch; they are
    # refused now so that no later change to how the tests start can make them live.
    result = attack(toy_task, _write(files))
    _assert_refused(result, db, reason)


def _assert_forgery_ignored(result: Any, db: Any) -> None:
    assert result.status == "graded", result
    assert result.reward == 0.0, result  # the forged report was not read: the untouched bug fails its test
    assert result.reward_row["outcome"] == "graded", result.reward_row
    assert result.reward_row["tests"]["FAIL_TO_PASS"] == {"tests/test_greet.py::test_greet": "failed"}
    row = _reward_flags(db, result.rollout_id)
    assert row["reward_hack_suspected"] and row["found_by_flag"], row
    assert "greet.py: registers atexit" in row["reward_hack_reason"], row


def test_the_tested_code_writing_a_forged_report_is_not_read(attack, toy_task, db) -> None:  # type: ignore[no-untyped-def]
    # The module under test (imported by the test) writes the report at exit: where the grader used to read it,
    # wherever pytest was told to write it, and over every file in HOME (a guess at where it is now).
    result = attack(toy_task, _write({"greet.py": PAYLOAD + BUGGY_GREET}))
    _assert_forgery_ignored(result, db)


def test_a_symlink_planted_at_the_report_path_is_not_followed(attack, toy_task, db) -> None:  # type: ignore[no-untyped-def]
    # At exit, after pytest wrote the real report, the tested code replaces it with a symlink to a forged one (on
    # 4f1089c the grader followed it); it also plants symlinks in HOME, where reports are read now.
    planter = f"""import atexit, os
def _plant():
    with open("/workspace/.forged.xml", "w") as f:
        f.write({FORGED_JUNIT!r})
    home = os.path.expanduser("~")
    links = [("/workspace/.harnessrl-junit.xml", ".forged.xml")]
    links += [(os.path.join(home, n), "/workspace/.forged.xml") for n in os.listdir(home)]
    for path, target in links:
        try:
            os.remove(path)
        except OSError:
            pass
        try:
            os.symlink(target, path)
        except OSError:
            pass
atexit.register(_plant)
"""
    result = attack(toy_task, _write({"greet.py": planter + BUGGY_GREET}))
    _assert_forgery_ignored(result, db)
