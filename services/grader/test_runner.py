"""What the grader trusts about a test run: which patches it refuses to run, how it starts pytest, and how it reads
the result back. Called by ``grade.py: grade_patch``; the launcher itself is ``pytest_launcher.py``.

- ``screen_patch``: before anything runs, the agent's patch is checked against the rules for test infrastructure
  (``refused``: reward 0, outcome ``patch_refused``) and for code that reaches into the test framework
  (``suspected``: graded as usual, recorded as ``rewards.reward_hack_suspected`` with the reason). Refused: any
  ``conftest.py``; a ``.pth``; ``sitecustomize``/``usercustomize``; a pytest configuration file
  (``pytest.ini``, ``pytest.toml`` and their dot forms) or a change to the pytest section of ``pyproject.toml``,
  ``tox.ini`` or ``setup.cfg``; a module or package that could be imported under a standard-library or
  test-framework name (at the repository root, or in any folder that is not a package, which is where pytest's
  ``rootdir``/``prepend`` imports put folders on ``sys.path``).
- ``prepare_test_run``: a test command that is plain pytest (``python -m pytest ARGS``, the default) runs through
  the launcher (``python -I``, the grader's configuration, the report outside the checkout); any other command runs
  as the task wrote it, its ``{junit_xml}`` pointing outside the checkout too.
- ``read_report`` / ``report_problem``: the report is read from the grader's HOME folder without following
  symlinks, only if it is a regular file, at most ``MAX_REPORT_BYTES``; a report that lists a passing test that was
  never collected, a test passing twice, or an exit status that contradicts it is not trusted.
"""

from __future__ import annotations

import configparser
import errno
import json
import os
import re
import secrets
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from services.grader import pytest_launcher
from services.grader.pytest_launcher import REPORT_FORMAT, guarded_top_level
from shared.tasks import JUNIT_PLACEHOLDER, GitError, run_git
from shared.untrusted_files import UntrustedFileError, read_untrusted

LAUNCHER_FILE = "pytest_launcher.py"
EMPTY_INIFILE = "pytest.ini"
LAUNCH_FILE = ".harnessrl-launch.json"
MAX_REPORT_BYTES = 40 * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024
# pytest's configuration files, in the order it looks for them in a folder.
PYTEST_CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
                       "setup.cfg")  # fmt: skip
PYTEST_ONLY_CONFIG_FILES = frozenset({"pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"})
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
MODULE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyw", ".pyd", ".so")
# Commands that are plain pytest and get the launcher (with the arguments that follow them).
PYTEST_PREFIXES = (("python", "-m", "pytest"), ("python3", "-m", "pytest"), ("pytest",), ("py.test",))
# Expansions the shell would do and shlex would not; quotes and plain words tokenise the same in both.
_SHELL_SPECIALS = set("$`*?[]{}~!\\")


class ReportError(Exception):
    """The test report could not be read as the grader requires (missing, a link, not a regular file, too big)."""


# --- screening the patch ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatchScreen:
    """``refused``: why the patch is not run (None: it runs). ``suspected``: why it looks like reward hacking."""

    refused: str | None = None
    suspected: list[str] = field(default_factory=list)


# (pattern on an added line, reason); the first group of checks applies to every file, the second to non-tests.
_SUSPICIOUS_ANYWHERE = [
    (re.compile(r"\b_pytest\b|\bpluggy\b"), "reaches into pytest's internals"),
    (re.compile(r"junit", re.IGNORECASE), "mentions junit"),
    (re.compile(r"\bsys\.modules\b"), "touches sys.modules"),
    (re.compile(r"\bbuiltins\b|__builtins__"), "touches builtins"),
    (re.compile(r"\bos\._exit\b"), "calls os._exit"),
    (re.compile(r"\batexit\b"), "registers atexit"),
    (
        re.compile(r"\bsys\.(settrace|setprofile|meta_path|path_hooks)\b|\bgc\.get_(objects|referrers)\b"),
        "reaches into the interpreter",
    ),  # fmt: skip
    (re.compile(r"harnessrl|\.harnessrl|pytest_launcher", re.IGNORECASE), "names the harness"),
    (
        re.compile(
            r"\bpytest_(runtest|collection|sessionfinish|sessionstart|configure|report|terminal|make)"
        ),
        "defines pytest hooks",
    ),  # fmt: skip
]
_SUSPICIOUS_OUTSIDE_TESTS = [
    (re.compile(r"^\s*(import|from)\s+(pytest|_pytest|pluggy)\b"), "imports the test framework"),
]


def _is_test_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    in_test_dir = any(p in ("tests", "test", "testing") for p in parts[:-1])
    return in_test_dir or name.startswith("test_") or name.endswith("_test.py")


def _module_name(component: str, last: bool) -> str:
    """The import name a path component would give (a folder, or a module file when ``last``)."""
    if not last or "." not in component:
        return component  # a folder, or an extensionless file (a symlink to a folder imports as a package)
    if component.endswith(MODULE_SUFFIXES):
        return component.split(".", 1)[0]
    return ""  # README.md, data.json: not importable


def changed_paths(repo: Path) -> list[str]:
    """Every path that differs from HEAD in the grader's checkout after the agent's patch was applied: changed,
    deleted, added, and added-but-ignored (a ``.gitignore`` the patch brings cannot hide a file)."""
    out = run_git(
        repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored", "--no-renames"
    )
    return sorted({entry[3:] for entry in out.decode("utf-8", errors="surrogateescape").split("\0") if entry})


def _refusal(repo: Path, base_commit: str, path: str, guarded: frozenset[str]) -> str | None:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if name == "conftest.py":
        return f"conftest.py is test infrastructure: {path}"
    if name.endswith(".pth"):
        return f".pth files run at interpreter start: {path}"
    if any(_module_name(p, i == len(parts) - 1) in STARTUP_MODULES for i, p in enumerate(parts)):
        return f"sitecustomize/usercustomize run at interpreter start: {path}"
    if name in PYTEST_ONLY_CONFIG_FILES:
        return f"pytest configuration: {path}"
    if name in ("pyproject.toml", "tox.ini", "setup.cfg"):
        problem = _config_change(repo, base_commit, path)
        if problem is not None:
            return problem
    for i, component in enumerate(parts):
        # Importable as a top-level name: at the root, or below a folder that is not a package.
        if i > 0 and _exists_no_follow(repo, "/".join([*parts[:i], "__init__.py"])):
            continue
        module = _module_name(component, i == len(parts) - 1)
        if module in guarded:
            where = "/".join(parts[:i]) or "the repository root"
            return f"shadows the standard library or the test runner: {module!r} in {where} ({path})"
    return None


def _exists_no_follow(repo: Path, rel: str) -> bool:
    return os.path.lexists(repo / rel)


def pytest_section(name: str, text: str | None) -> Any:
    """The pytest settings in one configuration file's text (None: no file or no pytest section)."""
    if text is None:
        return None
    if name == "pyproject.toml":
        try:
            return tomllib.loads(text).get("tool", {}).get("pytest")
        except tomllib.TOMLDecodeError as exc:
            return f"(unreadable: {exc})"
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        return f"(unreadable: {exc})"
    sections = ("tool:pytest", "pytest") if name == "setup.cfg" else ("pytest",)
    found = {s: dict(parser.items(s)) for s in sections if parser.has_section(s)}
    return found or None


def _config_change(repo: Path, base_commit: str, path: str) -> str | None:
    try:
        base_text: str | None = run_git(repo, "show", f"{base_commit}:{path}").decode("utf-8", "replace")
    except GitError:
        base_text = None
    try:
        now = read_no_follow(repo, path, MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        now = None
    except ReportError as exc:
        return f"runner configuration file is not a plain file ({exc}): {path}"
    if pytest_section(PurePosixPath(path).name, base_text) != pytest_section(PurePosixPath(path).name, now):
        return f"changes the pytest configuration in {path}"
    return None


def _added_lines(patch: str) -> dict[str, list[str]]:
    """Lines each file gains in a git diff, by the file's new path."""
    lines: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current = None
        elif line.startswith("+++ "):
            target = line[4:].split("\t")[0]
            current = lines.setdefault(target[2:], []) if target.startswith("b/") else None
        elif current is not None and line.startswith("+"):
            current.append(line[1:])
    return lines


def suspicious_lines(patch: str) -> list[str]:
    """Why the patch looks like it reaches into the test framework (one reason per file and kind)."""
    reasons: list[str] = []
    for path, added in _added_lines(patch).items():
        checks = _SUSPICIOUS_ANYWHERE + ([] if _is_test_file(path) else _SUSPICIOUS_OUTSIDE_TESTS)
        for pattern, reason in checks:
            if any(pattern.search(line) for line in added):
                reasons.append(f"{path}: {reason}")
    return reasons


def screen_patch(repo: Path, base_commit: str, patch: bytes) -> PatchScreen:
    """Decide, from the checkout with the patch applied and before anything runs, whether it may be run."""
    guarded = guarded_top_level()
    suspected = suspicious_lines(patch.decode("utf-8", errors="replace"))
    for path in changed_paths(repo):
        reason = _refusal(repo, base_commit, path, guarded)
        if reason is not None:
            return PatchScreen(refused=reason, suspected=[f"refused: {reason}", *suspected])
    return PatchScreen(suspected=suspected)


# --- starting the test run ---------------------------------------------------------------------------------


def base_inifile(repo: Path) -> str | None:
    """The configuration file pytest would read at the repository root, judged on the base commit's files
    (call before the agent's patch is applied); None when there is none."""
    for name in PYTEST_CONFIG_FILES:
        path = repo / name
        if path.is_symlink() or not path.is_file():
            continue
        if name in PYTEST_ONLY_CONFIG_FILES:
            return name
        if pytest_section(name, path.read_text(encoding="utf-8", errors="replace")) is not None:
            return name
    return None


def launcher_args(test_command: str) -> list[str] | None:
    """The pytest arguments of a plain pytest command (without its ``--junitxml``), or None for any other command
    (a shell construct, variables, globs, another program)."""
    command = test_command.replace(JUNIT_PLACEHOLDER, "JUNITXML")
    if any(c in _SHELL_SPECIALS for c in command):
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    if any(t and all(c in lexer.punctuation_chars for c in t) for t in tokens):
        return None
    for prefix in PYTEST_PREFIXES:
        if tuple(tokens[: len(prefix)]) == prefix:
            rest = tokens[len(prefix) :]
            break
    else:
        return None
    args: list[str] = []
    skip_next = False
    for token in rest:
        if skip_next:
            skip_next = False
        elif token in ("--junitxml", "--junit-xml"):
            skip_next = True
        elif not token.startswith(("--junitxml=", "--junit-xml=")):
            args.append(token)
    return args


@dataclass(frozen=True)
class TestRun:
    """How one test run is started and where its report lands (``report_name`` in the HOME folder)."""

    script: str
    hardened: bool
    report_name: str


def prepare_test_run(
    *,
    test_command: str,
    setup_commands: list[str],
    runner_dir: Path,
    home: Path,
    home_inside: str,
    workspace_inside: str,
    inifile: str | None,
) -> TestRun:
    """Write the launcher, the grader's empty configuration and the launch file, and return the script to run.

    ``runner_dir``: a folder the sandbox binds read-only (the launcher and configuration live there); ``home``: the
    sandbox's HOME on the host (``home_inside`` inside), where the launch file goes and the report will be.
    """
    token = secrets.token_hex(16)
    args = launcher_args(test_command)
    if args is None:
        report_name = f".harnessrl-junit-{token}.xml"
        command = test_command.replace(JUNIT_PLACEHOLDER, shlex.quote(f"{home_inside}/{report_name}"))
    else:
        report_name = f".harnessrl-report-{token}.json"
        runner_dir.mkdir(mode=0o755, exist_ok=True)
        launcher = runner_dir / LAUNCHER_FILE
        shutil.copyfile(pytest_launcher.__file__, launcher)
        (runner_dir / EMPTY_INIFILE).write_text("[pytest]\n")
        for path in (launcher, runner_dir / EMPTY_INIFILE):
            path.chmod(0o644)
        config = f"{workspace_inside}/{inifile}" if inifile else str(runner_dir / EMPTY_INIFILE)
        launch = {"workspace": workspace_inside, "report": f"{home_inside}/{report_name}", "inifile": config}
        (home / LAUNCH_FILE).write_text(json.dumps(launch))
        argv = ["python", "-I", str(launcher), f"{home_inside}/{LAUNCH_FILE}", *args]
        command = "exec " + shlex.join(argv)
    script = "\n".join(["set -e", *setup_commands, "set +e", command])
    return TestRun(script=script, hardened=args is not None, report_name=report_name)


# --- reading the report back -------------------------------------------------------------------------------


def read_no_follow(root: Path, rel: str, limit_bytes: int) -> bytes:
    """The bytes of ``root/rel``, no component followed if it is a symlink, only from a regular file, at most
    ``limit_bytes`` (``ReportError`` otherwise; ``FileNotFoundError`` when it is not there): the runner's reader of
    agent-written files (``shared.untrusted_files``) in the grader's errors."""
    try:
        read = read_untrusted(root, rel, limit_bytes)
    except UntrustedFileError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(exc.errno, exc.strerror) from exc
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ReportError(f"{rel}: a symlink, or not a folder, on the way: {exc.strerror}") from exc
        raise ReportError(f"{rel}: {exc.strerror}") from exc
    if read.truncated:
        raise ReportError(f"{rel} is larger than {limit_bytes} bytes")
    return read.data


def read_report(home: Path, report_name: str) -> bytes:
    """The report file of a test run (``ReportError``: missing or not to be trusted as a file)."""
    try:
        return read_no_follow(home, report_name, MAX_REPORT_BYTES)
    except FileNotFoundError as exc:
        raise ReportError("no report was written") from exc


@dataclass(frozen=True)
class LauncherReport:
    exit_code: int
    collected: list[str]
    junit: bytes | None
    outcomes: dict[str, str]  # node id -> passed | failed | skipped, from pytest's reports


def parse_launcher_report(data: bytes) -> LauncherReport:
    """The launcher's report (``REPORT_FORMAT``); ``ReportError`` when it is not one."""
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"report is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != REPORT_FORMAT:
        raise ReportError("report is not the launcher's format")
    exit_code, collected, junit = doc.get("exit_code"), doc.get("collected"), doc.get("junit")
    if (
        not isinstance(exit_code, int)
        or not isinstance(collected, list)
        or not all(isinstance(c, str) for c in collected)
    ):
        raise ReportError("report fields have the wrong types")
    if junit is not None and not isinstance(junit, str):
        raise ReportError("report junit is not text")
    outcomes = doc.get("outcomes")
    if not isinstance(outcomes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in outcomes.items()
    ):
        raise ReportError("report outcomes have the wrong types")
    return LauncherReport(exit_code, collected, junit.encode() if junit is not None else None, outcomes)


def report_problem(
    cases: list[tuple[str, str]],
    *,
    listed_keys: set[str],
    collected_keys: set[str] | None,
    runner_outcomes: dict[str, str] | None = None,
    reported_exit: int | None,
    process_exit: int,
    passed: str,
) -> str | None:
    """Why a junit report (its ``(key, status)`` cases) is not to be trusted, or None.

    A test may appear twice only when one of its entries is a failure (pytest writes a second case for an error in
    teardown after a failure); a passing case of a listed test (``listed_keys``, a parametrized case included) must
    name a collected test (other stray cases cannot change the reward, and pytest's junit names some items — doctests
    — differently from their node ids) and, with ``runner_outcomes`` (junit key -> the launcher's record of pytest's
    own reports), one that passed there; the launcher's exit status must be the process's, and 0 only when nothing
    failed.
    """
    seen: dict[str, list[str]] = {}
    for key, status in cases:
        seen.setdefault(key, []).append(status)
    for key, statuses in seen.items():
        if len(statuses) > 1 and all(s == passed for s in statuses):
            return f"test {key} reported passing {len(statuses)} times"
    if collected_keys is not None:
        stray = sorted(
            k
            for k, statuses in seen.items()
            if passed in statuses
            and k not in collected_keys
            and (k in listed_keys or k.split("[", 1)[0] in listed_keys)
        )
        if stray:
            return f"report lists passing tests that were never collected: {stray[:5]}"
    if runner_outcomes is not None:
        contradicted = sorted(
            k
            for k, statuses in seen.items()
            if passed in statuses and k in runner_outcomes and runner_outcomes[k] != passed
        )
        if contradicted:
            return f"junit says passed, pytest's reports said otherwise: {contradicted[:5]}"
    if reported_exit is not None:
        if reported_exit != process_exit:
            return f"report says exit status {reported_exit}, the test process ended with {process_exit}"
        if reported_exit == 0 and any(s != passed for st in seen.values() for s in st if s != "skipped"):
            return "report says every test passed but lists failures"
    return None
