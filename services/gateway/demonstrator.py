"""The reference demonstrator: the next action of a harness that fixes a task with its reference fix.

``--teacher reference`` (``shared/run_config.py: TeacherConfig``) answers a rollout's model calls with this
module's ``next_action``: a pure function of the task's reference fix, its test command, the harness and the
conversation so far, which returns the assistant message a competent agent would send next. The gateway
(``teacher.py``) renders that message into the student's token ids like any teacher reply.

The demonstration is the same five steps for every harness, told apart by how many replies the conversation
already holds (a retry of a call gets the same step again):

1. look at the repository (``ls``, and the folders of the files the fix changes);
2. show the files the fix changes (``cat``);
3. write the fix: each changed file whole, by a quoted heredoc (``cat <<'EOF' > path``, the form mini-swe-agent's
   own prompt shows), where the fixed text is known (``fixed_files``: a bundled task of plain files,
   ``shared.datasets.reference_files``) — what a small student can learn, since it is the file it just read with the
   bug fixed; otherwise ``git apply`` fed the reference diff by a quoted heredoc (exact for any number of files and
   hunks, and the workspace is a git checkout of the base commit);
4. run the task's test command (its junit report goes to ``/tmp``, never into the workspace and so the patch);
5. submit: mini-swe-agent's submit command, or, for a harness that ends when the model stops calling tools, a
   closing sentence.

How an action is said depends on the protocol the harness offers in the conversation: tools offered — one call of
its shell tool (a tool with a ``command``/``cmd`` string parameter); no tools and a fenced command block asked for
in the prompt (mini-swe-agent's ``mini_textbased``: exactly one ```` ```mswea_bash_command ```` block per answer) —
a sentence and that block; neither — the reference diff in a ``diff`` block, which a one-call agent can apply.

What it never does: read anything but the rollout's own task (the caller looks it up by the rollout the call is
bound to), or say the fix where the api refused it (eval splits, tasks without a reference fix:
``services/api/teachers.py``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from services.gateway.conversation import Conversation, Message, ToolCall, ToolSpec
from shared.tasks import JUNIT_PLACEHOLDER, patch_paths

MINI_SWE_AGENT = "mini-swe-agent"
MINI_SWE_AGENT_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""mini-swe-agent ends when a command prints its submit marker (and must be the only command of that action)."""
HEREDOC_END = "HARNESSRL_REFERENCE_FIX"
JUNIT_REPORT = "/tmp/harnessrl-reference-junit.xml"
COMMAND_PARAMETERS = ("command", "cmd")
SHELL_TOOL_NAMES = ("bash", "shell", "exec_command", "run_shell_command", "execute_command", "Bash")
FENCE = re.compile(r"```([A-Za-z0-9_\-]*(?:bash|sh|shell)[A-Za-z0-9_\-]*)[ \t]*\n")


class CannotDemonstrate(ValueError):
    """The demonstrator has no way to act in this conversation (the message says why)."""


def next_action(
    *, reference_fix: str, test_command: str, harness: str, conversation: Conversation, new_call_id: Any,
    fixed_files: dict[str, str] | None = None,
) -> Message:  # fmt: skip
    """The assistant message that continues ``conversation`` by the module's five steps."""
    paths = patch_paths(reference_fix)
    if not paths:
        raise CannotDemonstrate("the reference fix changes no file (not a unified diff)")
    step = sum(message.role == "assistant" for message in conversation.messages)
    commands = [
        ("First I look at the files of the repository.", list_command(paths)),
        ("I read the code the issue is about.", " && ".join(f"cat {shlex.quote(p)}" for p in paths)),
        ("Now I write the fixed code.", fix_command(reference_fix, fixed_files)),
        ("Now I run the tests to check the fix.", test_command.replace(JUNIT_PLACEHOLDER, JUNIT_REPORT)),
    ]
    tool = shell_tool(conversation.tools)
    if conversation.tools and tool is None:
        offered = ", ".join(t.name for t in conversation.tools)
        raise CannotDemonstrate(f"no shell tool among the tools offered ({offered})")
    fence = None if tool is not None else text_action_fence(conversation.messages)
    if tool is None and fence is None:
        return Message(role="assistant", content=f"The fix:\n\n```diff\n{reference_fix.rstrip()}\n```")
    if step < len(commands):
        thought, command = commands[step]
    elif harness == MINI_SWE_AGENT:
        thought, command = "The fix is in and tested; I submit it.", MINI_SWE_AGENT_SUBMIT
    else:
        return Message(role="assistant", content="The fix is applied and the tests were run.")
    if tool is not None:
        return Message(
            role="assistant",
            content=thought,
            tool_calls=[ToolCall(id=new_call_id(), name=tool.name, arguments=tool_arguments(tool, command))],
        )
    return Message(role="assistant", content=f"THOUGHT: {thought}\n\n```{fence}\n{command}\n```")


def list_command(paths: list[str]) -> str:
    """``ls`` of the repository's top folder, and of each folder below it that holds a file the fix changes."""
    folders = sorted({str(PurePosixPath(p).parent) for p in paths} - {"."})
    return " && ".join(["ls", *(f"ls {shlex.quote(f)}" for f in folders)])


def fix_command(reference_fix: str, fixed_files: dict[str, str] | None) -> str:
    """Step 3's command: the changed files written whole where their fixed text is known and a heredoc can hold it,
    else ``git apply`` of the reference fix."""
    if fixed_files:
        try:
            return write_command(fixed_files)
        except CannotDemonstrate:
            pass
    return apply_command(reference_fix)


def write_command(files: dict[str, str]) -> str:
    """Each file written whole by a quoted heredoc; a file whose text does not end with a newline, or holds a line
    equal to the end marker, cannot be (``CannotDemonstrate``)."""
    writes = []
    for path, body in files.items():
        marker = "EOF" if "\nEOF\n" not in f"\n{body}" else HEREDOC_END
        if not body.endswith("\n") or f"\n{marker}\n" in f"\n{body}":
            raise CannotDemonstrate(
                f"{path} cannot be written by a heredoc (no final newline, or the end marker)"
            )
        writes.append(f"cat <<'{marker}' > {shlex.quote(path)}\n{body}{marker}")
    return "\n".join(writes)


def apply_command(reference_fix: str) -> str:
    """``git apply`` with the diff in a quoted heredoc (nothing in it is expanded by the shell)."""
    body = reference_fix if reference_fix.endswith("\n") else reference_fix + "\n"
    if f"\n{HEREDOC_END}\n" in f"\n{body}":
        raise CannotDemonstrate("the reference fix holds the heredoc's end marker")
    return f"git apply <<'{HEREDOC_END}'\n{body}{HEREDOC_END}"


def shell_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The tool that runs a shell command: one with a string ``command``/``cmd`` parameter, known names first."""
    candidates = [t for t in tools if t.kind == "function" and _command_parameter(t) is not None]
    named = [t for t in candidates if t.name in SHELL_TOOL_NAMES]
    found = named or candidates
    return found[0] if found else None


def _command_parameter(tool: ToolSpec) -> str | None:
    properties = (tool.parameters or {}).get("properties") or {}
    return next((name for name in COMMAND_PARAMETERS if name in properties), None)


def tool_arguments(tool: ToolSpec, command: str) -> dict[str, Any]:
    """The shell tool's arguments for ``command`` (an array-typed parameter gets ``bash -lc``)."""
    name = _command_parameter(tool)
    assert name is not None
    schema = (tool.parameters.get("properties") or {})[name]
    if isinstance(schema, dict) and schema.get("type") == "array":
        return {name: ["bash", "-lc", command]}
    return {name: command}


def text_action_fence(messages: list[Message]) -> str | None:
    """The language of the fenced block a text-based agent asks its commands in (its system prompt, else its
    first user message), if any."""
    for message in [m for m in messages if m.role == "system"] + [m for m in messages if m.role == "user"][
        :1
    ]:
        if found := FENCE.search(message.content):
            return found.group(1)
    return None
