"""The scripted policy picks each harness's own tools for one harness-neutral script, and deals several scripts in
rotation, one per conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message, ToolSpec
from tests.fixtures.scripted_policy import ScriptedPolicy, fixed_logprob, step_text

pytestmark = pytest.mark.unit


def obj(*names: str, required: tuple[str, ...] = (), booleans: tuple[str, ...] = ()) -> dict:
    properties = {n: {"type": "string"} for n in names} | {b: {"type": "boolean"} for b in booleans}
    return {"type": "object", "properties": properties, "required": list(required)}


HARNESS_TOOLS = {
    "codex": [
        ToolSpec(name="exec_command", parameters=obj("cmd", "workdir", required=("cmd",))),
        ToolSpec(name="apply_patch", kind="custom"),
    ],
    "claude-code": [
        ToolSpec(name="Bash", parameters=obj("command", "description", required=("command",))),
        ToolSpec(name="Write", parameters=obj("file_path", "content", required=("file_path", "content"))),
        ToolSpec(name="Read", parameters=obj("file_path", required=("file_path",))),
    ],
    "claude-code-bare": [
        ToolSpec(name="Bash", parameters=obj("command", "description", required=("command",))),
        ToolSpec(
            name="Edit", parameters=obj("file_path", "old_string", "new_string", required=("file_path",))
        ),
        ToolSpec(name="Read", parameters=obj("file_path", required=("file_path",))),
    ],
    "qwen-code": [
        ToolSpec(
            name="run_shell_command",
            parameters=obj(
                "command", "description", required=("command", "is_background"), booleans=("is_background",)
            ),
        ),
        ToolSpec(
            name="write_file", parameters=obj("file_path", "content", required=("file_path", "content"))
        ),
        ToolSpec(name="read_file", parameters=obj("absolute_path", required=("absolute_path",))),
    ],
    "pi": [
        ToolSpec(name="bash", parameters=obj("command")),
        ToolSpec(name="write", parameters=obj("path", "content")),
        ToolSpec(name="read", parameters=obj("path")),
    ],
    "gemini": [
        ToolSpec(
            name="run_shell_command",
            parameters=obj("command", "description", "dir_path", required=("command",)),
        ),
        ToolSpec(
            name="write_file", parameters=obj("file_path", "content", required=("file_path", "content"))
        ),
        ToolSpec(name="read_file", parameters=obj("file_path", "start_line", required=("file_path",))),
    ],
}
CWD_LINES = {
    "codex": "<environment_context><cwd>/work/task</cwd></environment_context>",
    "claude-code": "Primary working directory: /work/task",
    "claude-code-bare": "CWD: /work/task\nDate: 2026-12-02",
    "qwen-code": "I'm currently working in the directory: /work/task",
    # Pi 1.x's system prompt lists its tools in a <tools> block of its own, before the chat template's.
    "pi": "<tools>\n- read: Read file contents\n- bash: Execute bash commands\n</tools>\n\n<cwd>\n/work/task\n</cwd>",
    "gemini": "<session_context>\n- **Workspace Directories:**\n  - /work/task\n- **Directory Structure:**",
}
EXPECTED = {
    "codex": [
        ("exec_command", {"cmd": "printf '%s' 'hi\n' > hello.txt"}),
        ("exec_command", {"cmd": "cat hello.txt"}),
        ("exec_command", {"cmd": "cat hello.txt"}),
    ],
    "claude-code": [
        ("Write", {"file_path": "/work/task/hello.txt", "content": "hi\n"}),
        ("Bash", {"command": "cat hello.txt"}),
        ("Read", {"file_path": "/work/task/hello.txt"}),
    ],
    "claude-code-bare": [  # no Write tool: the file is written with Bash
        ("Bash", {"command": "printf '%s' 'hi\n' > hello.txt"}),
        ("Bash", {"command": "cat hello.txt"}),
        ("Read", {"file_path": "/work/task/hello.txt"}),
    ],
    "qwen-code": [
        ("write_file", {"file_path": "/work/task/hello.txt", "content": "hi\n"}),
        ("run_shell_command", {"command": "cat hello.txt", "is_background": False}),
        ("read_file", {"absolute_path": "/work/task/hello.txt"}),
    ],
    "pi": [
        ("write", {"path": "hello.txt", "content": "hi\n"}),
        ("bash", {"command": "cat hello.txt"}),
        ("read", {"path": "hello.txt"}),
    ],
    "gemini": [
        ("write_file", {"file_path": "/work/task/hello.txt", "content": "hi\n"}),
        ("run_shell_command", {"command": "cat hello.txt"}),
        ("read_file", {"file_path": "/work/task/hello.txt"}),
    ],
}


@pytest.fixture(scope="module")
def chat_format(tiny_model_dir: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir)


def prompt_text(chat_format: ChatFormat, harness: str, tool_results: int) -> str:
    messages = [
        Message(role="system", content=f"Agent.\n{CWD_LINES[harness]}"),
        Message(role="user", content="make hello.txt"),
    ]
    messages += [
        Message(role="tool", content=f"result {i}", tool_call_id=f"c{i}") for i in range(tool_results)
    ]
    return chat_format.render_text(messages, HARNESS_TOOLS[harness], add_generation_prompt=True)


def parse(text: str) -> tuple[str, dict]:
    payload = json.loads(text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
    return payload["name"], payload["arguments"]


@pytest.mark.parametrize("harness", sorted(HARNESS_TOOLS))
def test_one_script_drives_every_harness(chat_format: ChatFormat, harness: str) -> None:
    from tests.fixtures.scripted_policy import DEFAULT_SCRIPT

    calls = [parse(step_text(DEFAULT_SCRIPT, prompt_text(chat_format, harness, k))) for k in range(3)]
    assert calls == EXPECTED[harness]
    assert step_text(DEFAULT_SCRIPT, prompt_text(chat_format, harness, 3)) == "done"


def test_side_call_without_tools_gets_the_final_text(chat_format: ChatFormat) -> None:
    text = chat_format.render_text([Message(role="user", content="title?")], [], add_generation_prompt=True)
    assert step_text([{"run": "ls"}, {"say": "finished"}], text) == "finished"


def test_a_text_based_agent_gets_one_fenced_command_per_step(
    tiny_model_dir: Path, chat_format: ChatFormat
) -> None:
    """mini-swe-agent's ``mini_textbased`` prompt offers no tools and asks for one fenced command per answer: step
    ``k`` answers the prompt that holds ``k`` earlier replies (its observations are plain user messages)."""
    from tests.fixtures.scripted_policy import MINI_SWE_AGENT_SCRIPT

    policy = ScriptedPolicy(tiny_model_dir, MINI_SWE_AGENT_SCRIPT)
    messages = [
        Message(
            role="system", content="One command per answer:\n```mswea_bash_command\nyour_command_here\n```"
        ),
        Message(role="user", content="Please solve this issue: make hello.txt"),
    ]
    answers = []
    for _ in range(5):
        prompt = chat_format.render_prompt(
            Conversation(provider_api="openai_chat", messages=messages, tools=[])
        )
        ids, _ = policy.sample(prompt, 200)
        answers.append(chat_format.decode(ids[:-1]))
        messages += [
            Message(role="assistant", content=answers[-1]),
            Message(role="user", content="<returncode>0</returncode>"),
        ]
    fenced = "Scripted step.\n\n```mswea_bash_command\n{}\n```".format
    assert answers == [
        fenced("printf '%s' 'hi\n' > hello.txt"),
        fenced("cat hello.txt"),
        fenced("cat hello.txt"),
        fenced("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
        "done",  # past the script's end: the final text
    ]


def test_ids_logprobs_and_cut(tiny_model_dir: Path, chat_format: ChatFormat) -> None:
    policy = ScriptedPolicy(tiny_model_dir, [{"say": "hello there"}])
    prompt = chat_format.render_prompt(
        Conversation(
            provider_api="openai_chat",
            messages=[Message(role="user", content="hi")],
            tools=HARNESS_TOOLS["pi"],
        )
    )
    ids, finish = policy.sample(prompt, 100)
    assert finish == "stop" and ids[-1] == chat_format.end_of_turn_id
    assert chat_format.decode(ids[:-1]) == "hello there"
    assert "".join(policy.pieces(ids)) == "hello there"
    cut, finish = policy.sample(prompt, 2)
    assert finish == "length" and cut == ids[:2]
    assert fixed_logprob(5) == -0.06


def test_scripts_rotate_per_conversation_and_stay_with_it(
    tiny_model_dir: Path, chat_format: ChatFormat
) -> None:
    policy = ScriptedPolicy(tiny_model_dir)
    solve = [{"write": {"path": "a.txt", "content": "right"}}, {"say": "solved"}]
    fail = [{"write": {"path": "a.txt", "content": "wrong"}}, {"say": "gave up"}]
    policy.set_scripts([solve, fail])
    tools = HARNESS_TOOLS["pi"]
    first_turns = []
    for _ in range(2):
        conversation = Conversation(
            provider_api="openai_chat",
            messages=[Message(role="system", content="Agent."), Message(role="user", content="fix it")],
            tools=tools,
        )
        ids, _ = policy.sample(chat_format.render_prompt(conversation), 200)
        first_turns.append(ids)
    texts = [chat_format.decode(ids[:-1]) for ids in first_turns]
    assert '"right"' in texts[0] and '"wrong"' in texts[1]
    # the second call of the failing conversation holds its own first reply and gets its script's next step
    prompt = chat_format.render_prompt(
        Conversation(
            provider_api="openai_chat",
            messages=[Message(role="system", content="Agent."), Message(role="user", content="fix it")],
            tools=tools,
        )
    )
    prompt += first_turns[1] + chat_format.encode(
        "\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    ids, _ = policy.sample(prompt, 200)
    assert chat_format.decode(ids[:-1]) == "gave up"
