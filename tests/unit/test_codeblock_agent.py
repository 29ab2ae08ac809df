"""The codeblock agent's edit: the fixed function from the model's code block replaces the same-named one in
the repository's source (never in a test file); an answer that names nothing known changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.runner.harnesses.codeblock_agent import apply_reply, source_files, user_prompt

pytestmark = pytest.mark.unit

MODULE = '''import math


def add(a, b):
    """Sum."""
    return a - b


def keep():
    return 1
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(MODULE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text("def add(a, b):\n    return 0\n")
    (tmp_path / "conftest.py").write_text("")
    return tmp_path


def test_prompt_shows_the_issue_and_the_source_but_no_tests(repo: Path) -> None:
    assert source_files(repo) == [Path("calc.py")]
    prompt = user_prompt("add subtracts", repo)
    assert prompt.startswith("Issue:\nadd subtracts") and "File calc.py:\n```python\nimport math" in prompt
    assert "test_calc" not in prompt


def test_fenced_function_replaces_the_definition_and_keeps_the_rest(repo: Path) -> None:
    reply = "Here is the fix:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    assert apply_reply(repo, reply) == ["calc.py:add"]
    text = (repo / "calc.py").read_text()
    assert "def add(a, b):\n    return a + b\n" in text and "return a - b" not in text
    assert text.startswith("import math\n") and "def keep():\n    return 1" in text
    assert (repo / "tests" / "test_calc.py").read_text() == "def add(a, b):\n    return 0\n"


def test_unfenced_code_and_unclosed_fences_are_read(repo: Path) -> None:
    assert apply_reply(repo, "def add(a, b):\n    return a + b\n") == ["calc.py:add"]
    (repo / "calc.py").write_text(MODULE)
    assert apply_reply(repo, "```python\ndef add(a, b):\n    return b + a\n") == ["calc.py:add"]
    assert "return b + a" in (repo / "calc.py").read_text()


@pytest.mark.parametrize(
    "reply",
    [
        "The bug is the minus sign.",
        "```python\ndef add(a, b)\n    return a + b\n```",  # syntax error
        "```python\ndef plus(a, b):\n    return a + b\n```",  # no such function
        "```javascript\nfunction add(a, b) { return a + b; }\n```",
    ],
)
def test_answers_that_name_nothing_known_change_nothing(repo: Path, reply: str) -> None:
    assert apply_reply(repo, reply) == []
    assert (repo / "calc.py").read_text() == MODULE


def test_several_definitions_are_replaced_bottom_up(repo: Path) -> None:
    reply = "```python\ndef keep():\n    return 2\n\n\ndef add(a, b):\n    x = a\n    return x + b\n```"
    assert sorted(apply_reply(repo, reply)) == ["calc.py:add", "calc.py:keep"]
    text = (repo / "calc.py").read_text()
    assert "    x = a\n    return x + b" in text and "def keep():\n    return 2" in text
