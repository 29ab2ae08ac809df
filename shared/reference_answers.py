"""Is an answer a training task's reference function? The control ``harnessrl bench learning`` reports: the share
of eval answers whose changed function equals, once normalized, the function a training task's reference fix
writes. A held-out split that shares nothing with training keeps it near 0; a policy that emits memorized
training answers on eval tasks raises it.

- **Changed functions** (``changed_functions``): the file before and after a patch are parsed with ``ast``; every
  function (at any depth) whose normalized source after differs from the same-named function before, or is new,
  is a changed function. **Normalized** = ``ast.unparse`` of the function without its docstring: formatting,
  comments and the docstring do not count, names and code do.
- **Patches** (``apply_patch``): unified diffs as ``git diff`` and the runner write them (``--- a/f``, ``+++ b/f``,
  ``@@ -l,n +l,n @@`` hunks), applied to the files of the task's repository directory; a hunk whose context does
  not match makes the answer unreadable (counted apart, never a match).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchMismatch(ValueError):
    """A patch that does not apply to the files it names."""


def file_patches(patch: str) -> dict[str, list[str]]:
    """The patch's lines per file it changes (the path after ``+++ b/``; deletions are left out)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            current = None if target == "/dev/null" else out.setdefault(target.removeprefix("b/"), [])
        elif line.startswith(
            ("diff --git", "--- ", "index ", "new file", "deleted file", "similarity", "rename")
        ):
            continue
        elif current is not None:
            current.append(line)
    return out


def apply_patch(source: str, hunks: list[str]) -> str:
    """``source`` with the hunk lines of one file applied (``PatchMismatch`` when its context differs)."""
    old = source.splitlines()
    new: list[str] = []
    at = 0
    for line in hunks:
        match = HUNK.match(line)
        if match:
            start = max(int(match.group(1)) - (0 if match.group(2) == "0" else 1), 0)
            if start < at:
                raise PatchMismatch("hunks overlap")
            new += old[at:start]
            at = start
        elif line.startswith(("+",)):
            new.append(line[1:])
        elif line.startswith(("-", " ")) or line == "":
            text = line[1:]
            if at >= len(old) or old[at] != text:
                raise PatchMismatch(f"line {at + 1} is not {text!r}")
            if not line.startswith("-"):
                new.append(text)
            at += 1
        # "\ No newline at end of file" and other markers change nothing here
    return "\n".join(new + old[at:]) + "\n"


def _functions(source: str) -> dict[str, str]:
    """Normalized source of every function in ``source`` by qualified-enough name (name, and an index when a
    name repeats); empty when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                body = body[1:] or [ast.Pass()]
            bare = ast.copy_location(type(node)(**{**node.__dict__, "body": body}), node)
            key = node.name if node.name not in out else f"{node.name}#{len(out)}"
            out[key] = ast.unparse(bare)
    return out


def changed_functions(before: str, after: str) -> set[str]:
    """Normalized sources of the functions ``after`` changes or adds relative to ``before``."""
    old = _functions(before)
    return {text for name, text in _functions(after).items() if old.get(name) != text}


def patched_functions(repo: Path, patch: str) -> set[str]:
    """The functions a patch changes in the repository directory ``repo`` (``PatchMismatch`` if it does not
    apply). Files that are not Python count for nothing."""
    changed: set[str] = set()
    for path, hunks in file_patches(patch).items():
        if not path.endswith(".py"):
            continue
        file = repo / path
        before = file.read_text() if file.is_file() else ""
        changed |= changed_functions(before, apply_patch(before, hunks))
    return changed


def reference_functions(references: Iterable[tuple[Path, str]]) -> set[str]:
    """Every function the reference fixes (repository, patch) write."""
    out: set[str] = set()
    for repo, patch in references:
        out |= patched_functions(repo, patch)
    return out
