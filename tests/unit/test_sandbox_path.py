"""``shared.sandbox.with_directory``: the sandbox venv's ``bin`` on a harness's ``PATH``."""

from __future__ import annotations

import pytest

from shared.sandbox import with_directory

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/npm/bin:/usr/local/bin:/usr/bin:/bin", "/npm/bin:/venv/bin:/usr/local/bin:/usr/bin:/bin"),
        ("/usr/bin:/bin", "/venv/bin:/usr/bin:/bin"),
        ("/a:/venv/bin:/usr/bin", "/a:/venv/bin:/usr/bin"),  # already there: left where the caller put it
        ("/a:/b", "/a:/b:/venv/bin"),  # no system directory: last
        ("/a::/usr/bin", "/a:/venv/bin:/usr/bin"),
    ],
)
def test_the_venv_goes_before_the_system_directories_and_after_what_the_harness_put_first(
    path: str, expected: str
) -> None:
    assert with_directory(path, "/venv/bin") == expected
