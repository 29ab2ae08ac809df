"""Test session wiring. Real services only: the machine's Postgres and Redis, an S3 server process (moto),
real Celery worker processes. Fixtures live in ``tests/fixtures/<area>.py``, one plugin per area.

Servers that cost minutes to start on 2 cores (an inference server, a whole suite) are session fixtures shared
by every module that can share them. The modules using one of ``EARLY_STOP``'s fixtures run one after the
other (``pytest_collection_modifyitems``), and the server is stopped right after the last test that needs it
(``early_stop``) instead of idling, with its memory, until the session ends.
"""

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = [
    "tests.fixtures.services",
    "tests.fixtures.model",
    "tests.fixtures.gateway",
    "tests.fixtures.rollouts",
    "tests.fixtures.learner",
    "tests.fixtures.product",
    "tests.fixtures.suite",
    "tests.fixtures.compose",
]

# Session fixtures that start an inference server: their users are grouped and they stop after the last one.
EARLY_STOP = ("shared_suite", "vllm_server")
_stoppers: dict[str, Callable[[], None]] = {}
_last_user: dict[str, str] = {}


@contextlib.contextmanager
def early_stop(name: str) -> Iterator[contextlib.ExitStack]:
    """The exit stack of session fixture ``name``: what is entered on it is closed after the session's last
    test that uses ``name`` (or at the session's end, whichever comes first)."""
    with contextlib.ExitStack() as stack:
        _stoppers[name] = stack.close
        try:
            yield stack
        finally:
            _stoppers.pop(name, None)


def _uses(item: pytest.Item, name: str) -> bool:
    return name in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that use one ``EARLY_STOP`` fixture one after the other, from where the first of them
    stood; every other module keeps its place and every module its tests' order."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(str(item.path), []).append(item)
    order: list[str] = []
    for path, module_items in modules.items():
        if path in order:
            continue
        order.append(path)
        for name in EARLY_STOP:
            if any(_uses(item, name) for item in module_items):
                order += [
                    p for p, its in modules.items() if p not in order and any(_uses(i, name) for i in its)
                ]
    items[:] = [item for path in order for item in modules[path]]


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        for name in EARLY_STOP:
            if _uses(item, name):
                _last_user[name] = item.nodeid


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    for name, nodeid in _last_user.items():
        if item.nodeid == nodeid and name in _stoppers:
            _stoppers.pop(name)()
