"""The learner and the gateway's call path read top to bottom: no function over 80 lines, and every record with more
than three fields is built by keyword (``kw_only`` dataclasses), so no call site hides what a positional ``None``
means. Benchmarks (``bench*.py``) are outside the call path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 80
MAX_POSITIONAL_FIELDS = 3

# The gateway's call path: a request from the harness in, through the splice and the upstream engine, to the
# captured record and the reply in the provider's format.
GATEWAY_CALL_PATH = (
    "app.py", "binding.py", "capture.py", "chat_format.py", "conversation.py", "encoders.py", "fast_bpe.py",
    "model_call.py",
    "normalize.py", "recorder.py", "request_checks.py", "row_ids.py", "splice.py", "state.py", "tips.py",
    "toolcalls.py", "upstream.py", "providers/anthropic_messages.py", "providers/fields.py", "providers/gemini.py",
    "providers/openai_chat.py", "providers/openai_errors.py", "providers/openai_responses.py", "providers/sse.py",
)  # fmt: skip


def checked_files() -> list[Path]:
    learner = [
        p for p in sorted((ROOT / "services" / "learner").glob("*.py")) if not p.name.startswith("bench")
    ]
    return learner + [ROOT / "services" / "gateway" / name for name in GATEWAY_CALL_PATH]


def long_functions(source: str) -> list[tuple[str, int]]:
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def positional_records(source: str) -> list[tuple[str, int]]:
    """Dataclasses with more than ``MAX_POSITIONAL_FIELDS`` fields in ``__init__`` that are not ``kw_only``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            name = call.func if call is not None else decorator
            if not (isinstance(name, ast.Name) and name.id == "dataclass"):
                continue
            if call is not None and any(k.arg == "kw_only" for k in call.keywords):
                continue
            init_fields = [
                s
                for s in node.body
                if isinstance(s, ast.AnnAssign)
                and "ClassVar" not in ast.unparse(s.annotation)
                and not (isinstance(s.value, ast.Call) and "init=False" in ast.unparse(s.value))
            ]
            if len(init_fields) > MAX_POSITIONAL_FIELDS:
                found.append((node.name, len(init_fields)))
    return found


def test_the_checks_find_what_they_look_for() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions("def f():\n    return 1\n") == []
    wide = "@dataclass\nclass Choice:\n    a: int\n    b: int\n    c: int\n    d: bool\n"
    assert positional_records(wide) == [("Choice", 4)]
    assert positional_records(wide.replace("@dataclass", "@dataclass(frozen=True, kw_only=True)")) == []
    assert positional_records(wide.replace("    d: bool", "    d: bool = field(init=False)")) == []


def test_every_checked_file_exists() -> None:
    assert [p for p in checked_files() if not p.exists()] == []


def test_no_function_in_the_learner_or_the_gateway_call_path_is_over_80_lines() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name} ({lines} lines)"
        for path in checked_files()
        for name, lines in long_functions(path.read_text())
    ]
    assert not found, "split these into functions named for what they do:\n" + "\n".join(found)


def test_wide_records_in_the_learner_and_the_gateway_call_path_are_keyword_only() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name} ({fields} fields)"
        for path in checked_files()
        for name, fields in positional_records(path.read_text())
    ]
    assert not found, "make these @dataclass(kw_only=True) and build them by keyword:\n" + "\n".join(found)
