"""Test session wiring. Real services only: the machine's Postgres and Redis, an S3 server process (moto),
real Celery worker processes. Fixtures live in ``tests/fixtures/<area>.py``, one plugin per area;
``tests/fixtures/units.py`` orders the session, stops shared servers early and splits the session between two
pytest-xdist workers (``make test`` runs ``-n 2``).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = [
    "tests.fixtures.units",
    "tests.fixtures.services",
    "tests.fixtures.model",
    "tests.fixtures.gateway",
    "tests.fixtures.rollouts",
    "tests.fixtures.learner",
    "tests.fixtures.product",
    "tests.fixtures.suite",
    "tests.fixtures.compose",
]
