"""The grader's pytest launcher: runs a task's tests inside the sandbox with the test runner, its plugins and the
standard library taken from outside the repository. Copied by ``services/grader/test_runner.py`` into a
grader-owned folder that the sandbox binds read-only, and started as ``python -I <this file> <launch file> <pytest
args...>``; on the host it is only imported for its constants (nothing runs at import).

Order matters, because the repository is the adversary's:

1. ``python -I``: no ``PYTHON*`` variables, no user site, neither the script's folder nor the working directory on
   ``sys.path``; ``sitecustomize``/``usercustomize`` can only come from the interpreter's own paths.
2. The launch file (written by the grader into the sandbox's HOME) is read without following symlinks and deleted
   before any repository code runs: it names the report file, which nothing else in the sandbox is told.
3. ``pytest`` is imported with plugin autoloading off and no ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS``, then a
   meta-path guard is installed: a top-level module named like a standard-library module or like the test
   framework (``GUARDED_TOP_LEVEL``) is only ever loaded from the interpreter's own paths, never from the
   repository or a folder pytest puts on ``sys.path`` later.
4. Only then is the repository put on ``sys.path`` (where ``python -m pytest`` had it), and pytest runs with the
   grader's configuration file (``-c``, the base commit's or an empty one) and ``--rootdir``; the junit report goes
   to a private folder in the sandbox's ``/tmp``.
5. The report (``REPORT_FORMAT``: pytest's exit code, the node ids it collected, the junit XML) is created with
   ``O_EXCL | O_NOFOLLOW`` under the name from step 2, and the process ends with ``os._exit``: ``atexit`` handlers
   the tested code registered never run after the report exists.

The code under test still runs in this process; what that leaves open is said in docs/security.md#grader.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from importlib.machinery import BuiltinImporter, FrozenImporter, PathFinder

# Top-level names the repository may never provide (beyond ``sys.stdlib_module_names``): the test framework, its
# plugin manager and helpers.
FRAMEWORK_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "pytest_launcher"})
# Standard-library names a project may legitimately use for its own top-level folder (``test/`` holds many
# projects' tests; the others are demos and tools no test runner imports).
STDLIB_NAMES_ALLOWED_IN_REPO = frozenset({"test", "idlelib", "turtledemo", "this", "antigravity"})
REPORT_FORMAT = "harnessrl-pytest-report/1"
MAX_JUNIT_BYTES = 32 * 1024 * 1024
LAUNCH_FILE_MAX_BYTES = 64 * 1024


def guarded_top_level() -> frozenset[str]:
    """Top-level module names that resolve only from the interpreter's own paths."""
    return (frozenset(sys.stdlib_module_names) - STDLIB_NAMES_ALLOWED_IN_REPO) | FRAMEWORK_MODULES


def _read_no_follow(path: str, limit_bytes: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = os.read(fd, limit_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise OSError(f"{path} is larger than {limit_bytes} bytes")
    return data


class _TrustedOnly:
    """Meta-path finder: guarded top-level names come from ``trusted_paths`` (the interpreter's) or not at all."""

    def __init__(self, guarded: frozenset[str], trusted_paths: list[str]) -> None:
        self.guarded = guarded
        self.trusted_paths = trusted_paths

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if path is not None or fullname not in self.guarded:
            return None
        for finder in (BuiltinImporter, FrozenImporter):
            spec = finder.find_spec(fullname)
            if spec is not None:
                return spec
        spec = PathFinder.find_spec(fullname, self.trusted_paths)
        if spec is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (the grader loads no standard-library or test-framework module "
                "from the repository)",
                name=fullname,
            )
        return spec


class _Collected:
    """A pytest plugin (this file's, not the repository's): the node ids pytest will run, and each one's outcome as
    pytest's own reports gave it (the grader checks the junit against both)."""

    def __init__(self) -> None:
        self.node_ids: list[str] = []
        self.outcomes: dict[str, str] = {}

    def pytest_collection_finish(self, session) -> None:  # type: ignore[no-untyped-def]
        self.node_ids = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        before = self.outcomes.get(report.nodeid)
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and before != "failed":
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and before is None:
            self.outcomes[report.nodeid] = "passed"


def main() -> None:
    launch_path, pytest_args = sys.argv[1], sys.argv[2:]
    launch = json.loads(_read_no_follow(launch_path, LAUNCH_FILE_MAX_BYTES))
    os.unlink(launch_path)
    workspace, report_path, inifile = launch["workspace"], launch["report"], launch["inifile"]

    def outside(entry: str) -> bool:
        full = os.path.abspath(entry) if entry else ""
        return bool(entry) and full != workspace and not full.startswith(workspace + os.sep)

    sys.path[:] = [p for p in sys.path if outside(p)]
    trusted_paths = list(sys.path)
    sys.dont_write_bytecode = True
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "PYTHONSTARTUP"):
        os.environ.pop(name, None)

    import pytest

    sys.meta_path.insert(0, _TrustedOnly(guarded_top_level(), trusted_paths))
    sys.path.insert(0, workspace)  # the tests import the project as ``python -m pytest`` from its root would

    private = tempfile.mkdtemp(prefix="harnessrl-junit-")
    junit_path = os.path.join(private, "junit.xml")
    collected = _Collected()
    args = [*pytest_args, "-p", "no:cacheprovider", "-c", inifile, f"--rootdir={workspace}",
            f"--confcutdir={workspace}", f"--junitxml={junit_path}"]  # fmt: skip
    exit_code = int(pytest.main(args, plugins=[collected]))
    try:
        junit: str | None = _read_no_follow(junit_path, MAX_JUNIT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        junit = None
    report = {
        "format": REPORT_FORMAT,
        "exit_code": exit_code,
        "collected": collected.node_ids,
        "outcomes": collected.outcomes,
        "junit": junit,
    }
    fd = os.open(report_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(report, f)
    for stream in (sys.stdout, sys.stderr):
        # The tested code may have replaced the stream; the report is written either way.
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(exit_code)


if __name__ == "__main__":
    main()
