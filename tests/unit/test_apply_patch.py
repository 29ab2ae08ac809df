"""``shared.tasks.apply_patch`` (a unified git diff applied in memory, exactly like ``git apply``) and
``shared.datasets.reference_files`` (a bundled task's changed files after its reference fix), checked against
``git apply`` itself on every bundled task."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from shared.datasets import load_dataset, reference_files, reference_patch
from shared.tasks import PatchApplyError, apply_patch

pytestmark = pytest.mark.unit

BEFORE = "a\nb\nc\nd\ne\nf\ng\nh\n"
TWO_HUNKS = """diff --git a/x.py b/x.py
--- a/x.py
+++ b/x.py
@@ -1,2 +1,2 @@
-a
+A
 b
@@ -7,2 +7,3 @@
 g
 h
+i
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1 @@
+print(1)
\\ No newline at end of file
"""


def test_hunks_apply_in_place_and_a_new_file_is_its_added_lines() -> None:
    assert apply_patch({"x.py": BEFORE}, TWO_HUNKS) == {
        "x.py": "A\nb\nc\nd\ne\nf\ng\nh\ni\n",
        "new.py": "print(1)",
    }


@pytest.mark.parametrize(
    ("files", "patch", "message"),
    [
        ({"x.py": BEFORE.replace("g", "G")}, TWO_HUNKS, r"x.py: line 7 does not match"),
        ({}, TWO_HUNKS, "no text given"),
        (
            {"x.py": BEFORE},
            "diff --git a/x.py b/x.py\n--- a/x.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
            "deletes",
        ),
        (
            {"x.py": "a\n"},
            "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -5 +5 @@\n-a\n+b\n",
            "past the end",
        ),
    ],
)
def test_a_diff_that_does_not_apply_is_refused(files: dict[str, str], patch: str, message: str) -> None:
    with pytest.raises(PatchApplyError, match=message):
        apply_patch(files, patch)


@pytest.mark.parametrize("dataset", ["swe_micro", "swe_mini"])
def test_every_bundled_tasks_fixed_files_equal_what_git_apply_makes(dataset: str, tmp_path: Path) -> None:
    for task in load_dataset(dataset):
        fixed = reference_files(dataset, task.instance_id)
        assert fixed, task.instance_id
        work = tmp_path / task.instance_id
        shutil.copytree(task.source.path, work)  # type: ignore[union-attr]
        subprocess.run(["git", "apply", "-"], input=reference_patch(dataset, task.instance_id), text=True,
                       cwd=work, check=True)  # fmt: skip
        assert {path: (work / path).read_text() for path in fixed} == fixed, task.instance_id


def test_unknown_tasks_have_no_fixed_files() -> None:
    assert reference_files("swe_micro", "no-such-task") is None
    assert reference_files("no_such_dataset", "clamp-1") is None
