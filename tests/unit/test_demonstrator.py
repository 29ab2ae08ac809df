"""The reference demonstrator (``services/gateway/demonstrator.py``): look, read, write the fix, test, submit — in the
protocol the conversation offers (mini-swe-agent's text blocks, a shell tool, or neither)."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from services.gateway.conversation import Conversation, Message, ToolSpec
from services.gateway.demonstrator import (
    CannotDemonstrate,
    apply_command,
    list_command,
    next_action,
    write_command,
)

pytestmark = pytest.mark.unit

FIX = """diff --git a/ranges.py b/ranges.py
--- a/ranges.py
+++ b/ranges.py
@@ -1,2 +1,2 @@
 def clamp(value, low, high):
-    return value
+    return max(low, min(value, high))
"""
TEST_COMMAND = "python -m pytest -q --junitxml={junit_xml}"
MINI_SYSTEM = "Reply with exactly ONE bash code block.\n\n```mswea_bash_command\nyour_command_here\n```\n"
ids = itertools.count()


FIXED = {"ranges.py": "def clamp(value, low, high):\n    return max(low, min(value, high))\n"}


def act(
    messages: list[Message], harness: str = "mini-swe-agent", tools: list[ToolSpec] | None = None,
    fixed_files: dict[str, str] | None = None,
) -> Message:  # fmt: skip
    conversation = Conversation(provider_api="openai_chat", messages=messages, tools=tools or [])
    return next_action(
        reference_fix=FIX,
        test_command=TEST_COMMAND,
        harness=harness,
        conversation=conversation,
        new_call_id=lambda: f"call_{next(ids)}",
        fixed_files=fixed_files,
    )


def block(message: Message) -> str:
    (command,) = re.findall(r"```mswea_bash_command\n(.*?)\n```", message.content, re.DOTALL)
    return command


def mini_commands(fixed_files: dict[str, str] | None = None, replies: int = 6) -> list[str]:
    messages = [
        Message(role="system", content=MINI_SYSTEM),
        Message(role="user", content="Please solve this issue"),
    ]
    commands = []
    for _ in range(replies):
        reply = act(messages, fixed_files=fixed_files)
        assert reply.content.startswith("THOUGHT: ") and not reply.tool_calls
        commands.append(block(reply))
        messages += [reply, Message(role="user", content="<returncode>0</returncode>")]
    return commands


def test_mini_swe_agent_text_protocol_looks_reads_applies_tests_and_submits() -> None:
    commands = mini_commands()
    assert commands[:2] == ["ls", "cat ranges.py"]
    assert commands[2] == apply_command(FIX)  # no fixed text known: the diff
    assert commands[3] == "python -m pytest -q --junitxml=/tmp/harnessrl-reference-junit.xml"
    assert commands[4:] == ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"] * 2  # a retry submits again


def test_where_the_fixed_file_is_known_it_is_written_whole_as_mini_swe_agent_shows() -> None:
    commands = mini_commands(FIXED, replies=3)
    assert commands[2] == f"cat <<'EOF' > ranges.py\n{FIXED['ranges.py']}EOF"
    nested = {"pkg/a b.py": "x = 1\n", "pkg/c.py": "EOF\n"}  # a quoted path; a body holding the usual marker
    assert write_command(nested) == (
        "cat <<'EOF' > 'pkg/a b.py'\nx = 1\nEOF\ncat <<'HARNESSRL_REFERENCE_FIX' > pkg/c.py\nEOF\nHARNESSRL_REFERENCE_FIX"
    )
    assert list_command(["pkg/a b.py", "pkg/c.py", "top.py"]) == "ls && ls pkg"
    with pytest.raises(CannotDemonstrate, match="final newline"):
        write_command({"a.py": "x = 1"})
    # a file a heredoc cannot hold falls back to the diff
    assert mini_commands({"ranges.py": "no final newline"}, replies=3)[2] == apply_command(FIX)


def test_a_tool_calling_harness_gets_the_same_actions_as_shell_tool_calls() -> None:
    tools = [
        ToolSpec(name="read_file", parameters={"type": "object", "properties": {"path": {"type": "string"}}}),
        ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}}),
    ]
    messages = [Message(role="user", content="fix it")]
    commands = []
    for _ in range(4):
        reply = act(messages, harness="qwen-code", tools=tools)
        (call,) = reply.tool_calls
        assert call.name == "bash"
        commands.append(call.arguments["command"])  # type: ignore[index]
        messages += [reply, Message(role="tool", content="ok", tool_call_id=call.id)]
    assert commands[2] == apply_command(FIX)
    done = act(messages, harness="qwen-code", tools=tools)
    assert not done.tool_calls and done.content  # it ends its turn
    mini = act(messages, harness="mini-swe-agent", tools=tools)
    assert mini.tool_calls[0].arguments == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
    codex = [
        ToolSpec(name="exec_command", parameters={"type": "object", "properties": {"cmd": {"type": "array"}}})
    ]
    assert act([], harness="codex", tools=codex).tool_calls[0].arguments == {"cmd": ["bash", "-lc", "ls"]}
    with pytest.raises(CannotDemonstrate, match="no shell tool"):
        act([], harness="claude-code", tools=tools[:1])


def test_without_tools_or_a_command_block_it_answers_the_diff() -> None:
    reply = act([Message(role="user", content="fix clamp")], harness="codeblock")
    assert reply.content.endswith(f"```diff\n{FIX.rstrip()}\n```")


def test_the_write_command_writes_the_fixed_files(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    files = {"ranges.py": FIXED["ranges.py"], "pkg/a b.py": "EOF\n  tail $x\n"}
    subprocess.run(["bash", "-c", write_command(files)], cwd=tmp_path, check=True)
    assert {p: (tmp_path / p).read_text() for p in files} == files


def test_the_apply_command_applies_the_fix_in_a_git_checkout(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "ranges.py").write_text("def clamp(value, low, high):\n    return value\n")
    subprocess.run(["bash", "-c", apply_command(FIX)], cwd=tmp_path, check=True)
    assert (
        tmp_path / "ranges.py"
    ).read_text() == "def clamp(value, low, high):\n    return max(low, min(value, high))\n"
    with pytest.raises(CannotDemonstrate, match="end marker"):
        apply_command(FIX + "HARNESSRL_REFERENCE_FIX\n")
