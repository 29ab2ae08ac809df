"""The reference-answer control (``shared/reference_answers.py``): which functions a patch changes, normalized,
and whether an answer's equals a training reference's."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.reference_answers import PatchMismatch, changed_functions, patched_functions, reference_functions

pytestmark = pytest.mark.unit

BUGGY = '''def absolute(x):
    """The distance of x from zero."""
    if x > 0:
        return -x
    return x


def helper(y):
    return y
'''

FIX = """diff --git a/magnitude.py b/magnitude.py
index 41a89d2..4a5edc8 100644
--- a/magnitude.py
+++ b/magnitude.py
@@ -1,5 +1,5 @@
 def absolute(x):
     \"\"\"The distance of x from zero.\"\"\"
-    if x > 0:
+    if x < 0:
         return -x
     return x
"""

# The same fix written differently: no docstring, other spacing, a comment; and a wrong fix.
SAME_FIX_REWORDED = """--- a/magnitude.py
+++ b/magnitude.py
@@ -1,5 +1,5 @@
 def absolute(x):
-    \"\"\"The distance of x from zero.\"\"\"
-    if x > 0:
+    if (x<0):  # negative
         return -x
     return x
"""

OTHER_FIX = FIX.replace("+    if x < 0:", "+    if x <= 0:")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "magnitude.py").write_text(BUGGY)
    return tmp_path


def test_a_patch_changes_the_functions_it_touches_normalized(repo: Path) -> None:
    changed = patched_functions(repo, FIX)
    assert changed == {"def absolute(x):\n    if x < 0:\n        return -x\n    return x"}
    assert (
        patched_functions(repo, SAME_FIX_REWORDED) == changed
    )  # docstring, comments and spacing do not count
    assert patched_functions(repo, OTHER_FIX) != changed
    assert changed_functions(BUGGY, BUGGY) == set()


def test_an_answer_equal_to_a_reference_is_found_and_a_patch_that_does_not_apply_is_refused(
    repo: Path,
) -> None:
    references = reference_functions([(repo, FIX)])
    assert patched_functions(repo, SAME_FIX_REWORDED) & references
    assert not patched_functions(repo, OTHER_FIX) & references
    with pytest.raises(PatchMismatch):
        patched_functions(repo, FIX.replace(" def absolute(x):", " def absolute(z):"))
    new_file = "--- /dev/null\n+++ b/extra.py\n@@ -0,0 +1,2 @@\n+def absolute(x):\n+    return abs(x)\n"
    assert patched_functions(repo, new_file) == {"def absolute(x):\n    return abs(x)"}
