"""The session's split between two xdist workers (``tests/fixtures/units.py``), run on a small test tree in a real
``pytest -n 2``: every test of a module runs on one worker, every module using one shared server fixture runs on
the same worker (so the server starts once), and the server stops after its last user."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.unit

CONFTEST = """
import time
import pytest
from tests.fixtures.units import early_stop

pytest_plugins = ["tests.fixtures.units"]

@pytest.fixture(scope="session")
def shared_suite():
    with early_stop("shared_suite") as stack:
        stack.callback(lambda: open("stopped.txt", "a").write("shared_suite\\n"))
        yield "suite"
"""


def _module(users_suite: bool) -> str:
    argument = "shared_suite" if users_suite else ""
    return "\n".join(f"def test_{i}({argument}):\n    import time; time.sleep(0.05)\n" for i in range(6))


def test_a_module_and_a_servers_users_each_run_on_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a=_module(True), test_b=_module(False), test_c=_module(True), test_d=_module(False)
    )
    # the tree's conftest imports tests.fixtures.units from this repository
    from tests.fixtures.services import REPO_ROOT

    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    result = pytester.runpytest_subprocess("-n", "2", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=24)
    workers: dict[str, set[str]] = defaultdict(set)
    for line in result.outlines:
        if match := re.search(r"\[(gw\d)\] .*PASSED (test_\w)\.py::", line):
            workers[match[2]].add(match[1])
    assert sorted(workers) == ["test_a", "test_b", "test_c", "test_d"], result.outlines
    assert all(len(w) == 1 for w in workers.values()), dict(workers)  # a module never splits
    assert workers["test_a"] == workers["test_c"], dict(workers)  # the server's users share a worker
    assert "scheduling tests via ModuleGroupScheduling" in result.stdout.str()
    # the server started once and stopped once (after test_c, its last user, or at the worker's end)
    assert (pytester.path / "stopped.txt").read_text() == "shared_suite\n"


def test_each_worker_has_its_own_redis_dbs(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fixtures.services import redis_db_for

    monkeypatch.delenv("HARNESSRL_TEST_X_DB", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert redis_db_for("HARNESSRL_TEST_X_DB", 11) == 11  # no xdist: the documented default
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    first = {redis_db_for("HARNESSRL_TEST_X_DB", db) for db in (11, 12, 13, 14, 15)}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    second = {redis_db_for("HARNESSRL_TEST_X_DB", db) for db in (11, 12, 13, 14, 15)}
    assert first == {11, 12, 13, 14, 15} and not first & second and min(second) >= 1
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    with pytest.raises(RuntimeError, match="at most 2 xdist workers"):
        redis_db_for("HARNESSRL_TEST_X_DB", 11)
    monkeypatch.setenv("HARNESSRL_TEST_X_DB", "3")
    assert redis_db_for("HARNESSRL_TEST_X_DB", 11) == 3  # an explicit setting wins
