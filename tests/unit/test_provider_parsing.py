"""``parse``, ``render`` and ``render_error`` of each adapter on bodies shaped like the real harnesses'
(``docs/harnesses.md``): Codex CLI (Responses), Claude Code (Messages), Qwen Code and
Pi (Chat), and a google-genai style Gemini body. ``REALISTIC_BODIES`` also seeds the property tests."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from services.gateway.conversation import Completion, Conversation, Message, ProviderError, ToolCall
from services.gateway.providers import anthropic_messages, gemini, openai_chat, openai_responses

pytestmark = pytest.mark.unit

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"

CODEX_TURN_2: dict[str, Any] = {
    "model": "gpt-5.5",
    "stream": True,
    "input": [
        {"type": "message", "id": "msg_1", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex, a coding agent."}]},
        {"type": "message", "id": "msg_2", "role": "developer",
         "content": [{"type": "input_text", "text": "<permissions instructions>…</permissions instructions>"}]},
        {"type": "message", "id": "msg_3", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}]},
        {"type": "message", "id": "msg_4", "role": "user",
         "content": [{"type": "input_text", "text": "create hello.txt containing hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Need a file."}],
         "content": None, "encrypted_content": "gAAAAB-foreign-blob"},
        {"type": "function_call", "status": "completed", "id": "fc_1", "name": "exec_command",
         "arguments": "{\"cmd\": \"printf hi > hello.txt\"}", "call_id": "call_1"},
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1",
         "output": "Chunk ID: be17cc\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\n"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_2",
         "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA hello.txt\n"},
    ],
    "tools": [
        {"type": "function", "name": "exec_command", "description": "Runs a command",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
         "strict": False},
        {"type": "custom", "name": "apply_patch", "description": "Edit files",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
        {"type": "namespace", "name": "multi_agent_v1", "tools": []},
        {"type": "web_search", "external_web_access": True},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "thread-1",
    "text": {"verbosity": "low"},
    "client_metadata": {"turn_id": "t1"},
}  # fmt: skip

CLAUDE_CODE_TURN_2: dict[str, Any] = {
    "model": "fake-model",
    "max_tokens": 32000,
    "stream": True,
    "system": [
        {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."},
        {"type": "text", "text": "Main prompt.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>Today's date is 2026-11-30.</system-reminder>"},
            {"type": "text", "text": "create hello.txt containing hi"}]},
        {"role": "system", "content": "Available agent types for the Agent tool: …"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Use Bash.", "signature": "sig-abc"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash",
             "input": {"command": "printf hi > hello.txt", "description": "Create hello.txt"}}]},
        {"role": "user", "content": [
            {"tool_use_id": "toolu_1", "type": "tool_result", "content": "(Bash completed with no output)",
             "is_error": False, "cache_control": {"type": "ephemeral"}}]},
    ],
    "tools": [
        {"name": "Bash", "description": "Run a command",
         "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
        {"name": "Write", "description": "Write a file",
         "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                           "content": {"type": "string"}}}},
    ],
    "metadata": {"user_id": "{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s\"}"},
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
}  # fmt: skip

QWEN_CODE_TURN_2: dict[str, Any] = {
    "model": "served",
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 8000,
    "messages": [
        {"role": "system", "content": "You are Qwen Code, …"},
        {"role": "user", "content": "This is the Qwen Code. We are setting up the context for our chat."},
        {"role": "assistant", "content": "Got it. Thanks for the context!"},
        {"role": "user", "content": [{"type": "text", "text": "create hello.txt containing hi"}]},
        {"role": "assistant", "content": "", "reasoning_content": "Shell it.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "run_shell_command",
                "arguments": "{\"command\":\"printf hi > hello.txt\",\"description\":\"Create hello.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [
            {"type": "text", "text": "Command: printf hi > hello.txt\nExit Code: 0"}]},
    ],
    "tools": [{"type": "function", "function": {
        "name": "run_shell_command", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
}  # fmt: skip

PI_CHAT_REASONING: dict[str, Any] = {
    "model": "served",
    "stream": True,
    "stream_options": {"include_usage": True},
    "store": False,
    "max_completion_tokens": 16384,
    "reasoning_effort": "medium",
    "messages": [
        {"role": "developer", "content": "You are an expert coding assistant operating inside pi."},
        {"role": "user", "content": [{"type": "text", "text": "create hello.txt containing hi"}]},
        {"role": "assistant", "content": None, "reasoning_content": "Write it.", "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "write", "arguments": "{\"path\":\"hello.txt\",\"content\":\"hi\"}"}}]},
        {"role": "tool", "content": "(no output)", "tool_call_id": "call_9"},
    ],
    "tools": [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}],
}  # fmt: skip

GEMINI_TURN_2: dict[str, Any] = {
    "systemInstruction": {"role": "user", "parts": [{"text": "You are a coding agent."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "create hello.txt containing hi"}]},
        {"role": "model", "parts": [
            {"text": "Planning.", "thought": True},
            {"functionCall": {"name": "write_file", "args": {"file_path": "/w/hello.txt", "content": "hi"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "write_file", "response": {"output": "Wrote hello.txt"}}}]},
    ],
    "tools": [
        {"functionDeclarations": [{"name": "write_file", "description": "Write a file",
                                   "parameters": {"type": "OBJECT", "properties": {
                                       "file_path": {"type": "STRING"}, "content": {"type": "STRING"}}}}]},
        {"googleSearch": {}},
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {"maxOutputTokens": 2048, "temperature": 0.7, "topP": 0.95,
                         "thinkingConfig": {"includeThoughts": True}},
}  # fmt: skip

REALISTIC_BODIES: dict[str, list[dict[str, Any]]] = {
    "openai_responses": [CODEX_TURN_2, {"model": "m", "input": "hi", "instructions": "be brief"}],
    "anthropic_messages": [
        CLAUDE_CODE_TURN_2,
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
    ],
    "openai_chat": [QWEN_CODE_TURN_2, PI_CHAT_REASONING],
    "gemini": [GEMINI_TURN_2],
}


def roles(conversation: Conversation) -> list[str]:
    return [message.role for message in conversation.messages]


# --- Responses (Codex) ---------------------------------------------------------------------------------


def test_codex_turn_parses_into_turns_tools_and_notes() -> None:
    conversation = openai_responses.parse(CODEX_TURN_2)
    assert roles(conversation) == [
        "system",
        "system",
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert conversation.messages[0].content == "You are Codex, a coding agent."
    shell_turn = conversation.messages[4]
    assert shell_turn.reasoning == "Need a file."  # a foreign blob falls back to the summary
    assert shell_turn.tool_calls == [
        ToolCall(id="call_1", name="exec_command", arguments={"cmd": "printf hi > hello.txt"})
    ]
    assert conversation.messages[5].tool_call_id == "call_1"
    assert conversation.messages[6].tool_calls == [
        ToolCall(id="call_2", name="apply_patch", arguments=PATCH, kind="custom")
    ]
    assert [(t.name, t.kind) for t in conversation.tools] == [
        ("exec_command", "function"),
        ("apply_patch", "custom"),
    ]
    apply_patch = conversation.tools[1]
    assert apply_patch.parameters["required"] == ["input"]
    assert "begin_patch hunk+" in apply_patch.parameters["properties"]["input"]["description"]
    notes = "\n".join(conversation.notes)
    assert "namespace tool dropped" in notes and "web_search tool dropped" in notes
    assert "developer role read as system" in notes and "foreign encrypted_content" in notes
    assert "ignored fields: client_metadata, include, parallel_tool_calls" in notes
    assert (
        conversation.stream is True and conversation.tool_choice == "auto" and conversation.model == "gpt-5.5"
    )


def test_responses_reasoning_round_trips_through_our_blob() -> None:
    completion = Completion(id="r1", model="m", text="Done.", reasoning="Full chain of thought.\nLine 2.")
    conversation = openai_responses.parse({"model": "m", "input": "hi"})
    output = openai_responses.render(completion, conversation)["output"]
    # A harness that keeps only the blob (summary cut to a headline) still gives back the whole reasoning.
    output[0]["summary"] = [{"type": "summary_text", "text": "headline"}]
    echoed = openai_responses.parse({"model": "m", "input": [{"role": "user", "content": "hi"}, *output]})
    assert echoed.messages[-1].reasoning == "Full chain of thought.\nLine 2."


def test_responses_render_ids_status_and_custom_tool_call() -> None:
    conversation = openai_responses.parse(CODEX_TURN_2)
    completion = Completion(
        id="abc",
        model="served",
        tool_calls=[ToolCall(id="call_7", name="apply_patch", arguments={"input": PATCH}, kind="custom")],
        finish_reason="tool_calls",
        prompt_tokens=100,
        completion_tokens=20,
    )
    body = openai_responses.render(completion, conversation)
    assert body["id"] == "resp_abc" and body["status"] == "completed" and body["model"] == "gpt-5.5"
    assert body["output"] == [
        {"type": "custom_tool_call", "id": "ctc_7", "status": "completed", "call_id": "call_7",
         "name": "apply_patch", "input": PATCH}
    ]  # fmt: skip
    assert body["usage"]["total_tokens"] == 120
    cut = openai_responses.render(
        Completion(id="x", model="m", text="par", finish_reason="length"), conversation
    )
    assert cut["status"] == "incomplete" and cut["incomplete_details"] == {"reason": "max_output_tokens"}


def test_responses_context_length_error_names_input() -> None:
    body = openai_responses.render_error(openai_responses.context_length_error(limit=100, requested=150))
    assert body["error"]["code"] == "context_length_exceeded" and body["error"]["param"] == "input"
    assert "maximum context length is 100 tokens" in body["error"]["message"]


def test_responses_refuses_server_state_and_bad_items() -> None:
    with pytest.raises(ProviderError, match="previous_response_id"):
        openai_responses.parse({"model": "m", "input": "hi", "previous_response_id": "resp_1"})
    with pytest.raises(ProviderError, match=r"input\[1\]\.call_id: expected a string"):
        openai_responses.parse(
            {"input": [{"role": "user", "content": "x"}, {"type": "function_call", "name": "f"}]}
        )
    with pytest.raises(ProviderError, match=r"input: expected a JSON array"):
        openai_responses.parse({"input": 5})
    with pytest.raises(ProviderError, match="max_output_tokens"):
        openai_responses.parse({"input": "hi", "max_output_tokens": 10**30})


# --- Messages (Claude Code) ----------------------------------------------------------------------------


def test_claude_code_turn_parses() -> None:
    conversation = anthropic_messages.parse(CLAUDE_CODE_TURN_2)
    assert roles(conversation) == ["system", "user", "system", "assistant", "tool"]
    assert (
        conversation.messages[0].content
        == "You are a Claude agent, built on Anthropic's Claude Agent SDK.\nMain prompt."
    )
    assert conversation.messages[1].content.endswith("\ncreate hello.txt containing hi")
    assert conversation.messages[2].content.startswith("Available agent types")
    assistant = conversation.messages[3]
    assert assistant.reasoning == "Use Bash." and assistant.content == ""
    assert assistant.tool_calls[0].arguments == {
        "command": "printf hi > hello.txt",
        "description": "Create hello.txt",
    }
    assert conversation.messages[4].content == "(Bash completed with no output)"
    assert conversation.max_tokens == 32000 and conversation.stream is True
    notes = "\n".join(conversation.notes)
    assert "mid-conversation system message" in notes
    assert "ignored fields: context_management, metadata, output_config, thinking" in notes


def test_anthropic_tool_results_and_text_keep_block_order() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "A", "input": {}},
                {"type": "tool_use", "id": "toolu_b", "name": "B", "input": {"x": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "one"}],
                 "is_error": True},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "two"},
                {"type": "text", "text": "[Your previous response had no visible output.]"}]},
        ],
        "tools": [],
        "tool_choice": {"type": "any"},
    }  # fmt: skip
    conversation = anthropic_messages.parse(body)
    assert [(m.role, m.content, m.tool_call_id) for m in conversation.messages[2:]] == [
        ("tool", "one", "toolu_a"),
        ("tool", "two", "toolu_b"),
        ("user", "[Your previous response had no visible output.]", None),
    ]
    assert conversation.tool_choice is None  # a choice without tools means nothing (compaction turns)
    assert "tool_result is_error" in "\n".join(conversation.notes)


def test_anthropic_render_and_errors() -> None:
    conversation = anthropic_messages.parse(CLAUDE_CODE_TURN_2)
    completion = Completion(
        id="m1",
        model="served",
        text="Done.",
        tool_calls=[ToolCall(id="toolu_9", name="Write", arguments={"file_path": "a", "content": "b"})],
        finish_reason="tool_calls",
        prompt_tokens=3,
        completion_tokens=4,
    )
    body = anthropic_messages.render(completion, conversation)
    assert body["id"] == "msg_m1" and body["stop_reason"] == "tool_use" and body["model"] == "fake-model"
    assert body["content"] == [
        {"type": "text", "text": "Done."},
        {"type": "tool_use", "id": "toolu_9", "name": "Write", "input": {"file_path": "a", "content": "b"}},
    ]
    length = anthropic_messages.render(
        Completion(id="m2", model="m", text="x", finish_reason="length"), conversation
    )
    assert length["stop_reason"] == "max_tokens"
    overflow = anthropic_messages.context_length_error(limit=8192, requested=9000)
    assert overflow.status == 400
    assert anthropic_messages.render_error(overflow) == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 9000 tokens > 8192 maximum",
        },
    }
    assert (
        anthropic_messages.render_error(ProviderError(401, "bad key"))["error"]["type"]
        == "authentication_error"
    )
    assert anthropic_messages.render_error(ProviderError(529, "busy"))["error"]["type"] == "overloaded_error"
    assert (
        anthropic_messages.render_error(ProviderError(502, "down", "api_error"))["error"]["type"]
        == "api_error"
    )
    assert anthropic_messages.models_list(["a", "b"])["last_id"] == "b"


def test_anthropic_rejects_bad_roles_and_types() -> None:
    with pytest.raises(ProviderError, match=r"messages\[0\]\.role"):
        anthropic_messages.parse({"messages": [{"role": "bot", "content": "x"}]})
    with pytest.raises(ProviderError, match=r"messages\[0\]\.content\[0\]\.tool_use_id"):
        anthropic_messages.parse({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})
    with pytest.raises(ProviderError, match="temperature"):
        anthropic_messages.parse(
            {"messages": [{"role": "user", "content": "x"}], "temperature": float("nan")}
        )
    with pytest.raises(ProviderError, match="max_tokens"):
        anthropic_messages.parse({"messages": [{"role": "user", "content": "x"}], "max_tokens": True})


# --- Chat (Qwen Code, Pi) ------------------------------------------------------------------------------


def test_qwen_code_turn_parses() -> None:
    conversation = openai_chat.parse(QWEN_CODE_TURN_2)
    assert roles(conversation) == ["system", "user", "assistant", "user", "assistant", "tool"]
    call = conversation.messages[4].tool_calls[0]
    assert call.arguments == {"command": "printf hi > hello.txt", "description": "Create hello.txt"}
    assert conversation.messages[4].reasoning == "Shell it."
    assert conversation.messages[5].content == "Command: printf hi > hello.txt\nExit Code: 0"
    assert conversation.include_usage is True and conversation.max_tokens == 8000


def test_pi_reasoning_turn_parses() -> None:
    conversation = openai_chat.parse(PI_CHAT_REASONING)
    assert conversation.messages[0] == Message(
        role="system", content="You are an expert coding assistant operating inside pi."
    )
    assert conversation.max_tokens == 16384
    assert conversation.messages[2].content == "" and conversation.messages[2].reasoning == "Write it."
    assert "ignored fields: reasoning_effort, store" in conversation.notes


def test_chat_arguments_compare_by_meaning_not_bytes() -> None:
    spaced = copy.deepcopy(QWEN_CODE_TURN_2)
    spaced["messages"][4]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"command": "printf hi > hello.txt", "description": "Create hello.txt"}, indent=2
    )
    assert openai_chat.parse(spaced).messages == openai_chat.parse(QWEN_CODE_TURN_2).messages


def test_chat_invalid_arguments_kept_as_text_with_a_note() -> None:
    body = copy.deepcopy(QWEN_CODE_TURN_2)
    body["messages"][4]["tool_calls"][0]["function"]["arguments"] = "{not json"
    conversation = openai_chat.parse(body)
    assert conversation.messages[4].tool_calls[0].arguments == "{not json"
    assert any("not valid JSON" in note for note in conversation.notes)


def test_chat_render_and_errors() -> None:
    conversation = openai_chat.parse(QWEN_CODE_TURN_2)
    completion = Completion(
        id="x1",
        model="served",
        reasoning="hmm",
        tool_calls=[ToolCall(id="call_5", name="run_shell_command", arguments={"command": "ls"})],
        finish_reason="tool_calls",
        prompt_tokens=10,
        completion_tokens=2,
    )
    body = openai_chat.render(completion, conversation)
    message = body["choices"][0]["message"]
    assert body["id"] == "chatcmpl-x1" and body["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] is None and message["reasoning_content"] == "hmm"
    assert message["tool_calls"] == [
        {
            "id": "call_5",
            "type": "function",
            "function": {"name": "run_shell_command", "arguments": '{"command": "ls"}'},
        }
    ]
    overflow = openai_chat.render_error(openai_chat.context_length_error(8192, 10000))
    assert overflow["error"]["code"] == "context_length_exceeded" and overflow["error"]["param"] == "messages"
    assert "maximum context length is 8192 tokens" in overflow["error"]["message"]
    assert openai_chat.render_error(ProviderError(401, "no key"))["error"]["code"] == "invalid_api_key"
    assert (
        openai_chat.render_error(ProviderError(503, "down", "overloaded_error"))["error"]["type"]
        == "server_error"
    )
    assert openai_chat.render_error(ProviderError(429, "slow"))["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": [{"role": "user", "content": 5}]}, r"messages\[0\]\.content"),
        ({"messages": [{"role": "tool", "content": "x"}]}, r"messages\[0\]\.tool_call_id"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "top_p": 2}, "top_p"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, r"stop\[0\]"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}, "tool_choice"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
    ],
)
def test_chat_bad_input_names_the_field(body: Any, field: str) -> None:
    with pytest.raises(ProviderError, match=field) as caught:
        openai_chat.parse(body)
    assert caught.value.status == 400


# --- Gemini --------------------------------------------------------------------------------------------


def test_gemini_turn_parses_and_pairs_results_by_name() -> None:
    conversation = gemini.parse(GEMINI_TURN_2, model="gemini-x", stream=True)
    assert roles(conversation) == ["system", "user", "assistant", "tool"]
    assistant, result = conversation.messages[2:]
    assert assistant.reasoning == "Planning." and assistant.content == ""
    assert assistant.tool_calls[0].arguments == {"file_path": "/w/hello.txt", "content": "hi"}
    assert result.content == "Wrote hello.txt" and result.tool_call_id == assistant.tool_calls[0].id
    assert conversation.tools[0].parameters == {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    }
    assert conversation.model == "gemini-x" and conversation.stream is True
    assert (conversation.max_tokens, conversation.temperature, conversation.top_p) == (2048, 0.7, 0.95)
    assert conversation.tool_choice == "auto"
    notes = "\n".join(conversation.notes)
    assert "googleSearch tool dropped" in notes and "thinkingConfig" in notes


def test_gemini_accepts_snake_case_and_forced_function() -> None:
    body = {
        "system_instruction": {"parts": [{"text": "sys"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_function_names": ["f"]}},
        "generation_config": {"max_output_tokens": 7, "stop_sequences": ["END"]},
    }
    conversation = gemini.parse(body, model="g")
    assert conversation.messages[0].content == "sys"
    assert conversation.tool_choice == {"name": "f"}
    assert conversation.max_tokens == 7 and conversation.stop == ["END"]


def test_gemini_render_errors_and_json_array_stream_type() -> None:
    conversation = gemini.parse(GEMINI_TURN_2, model="gemini-x")
    body = gemini.render(Completion(id="g1", model="m", text="ok", finish_reason="length"), conversation)
    assert body["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert body["candidates"][0]["content"] == {"role": "model", "parts": [{"text": "ok"}]}
    overflow = gemini.render_error(gemini.context_length_error(100, 250))
    assert overflow == {
        "error": {
            "code": 400,
            "message": "The input token count (250) exceeds the maximum number of tokens allowed (100).",
            "status": "INVALID_ARGUMENT",
        }
    }
    assert gemini.render_error(ProviderError(503, "down"))["error"]["status"] == "UNAVAILABLE"
    assert gemini.stream_content_type(conversation) == "text/event-stream"
    conversation.sse = False
    assert gemini.stream_content_type(conversation) == "application/json"
    assert gemini.models_list(["g"])["models"][0]["name"] == "models/g"


def test_gemini_rejects_bad_input() -> None:
    with pytest.raises(ProviderError, match="contents"):
        gemini.parse({"contents": []}, model="g")
    with pytest.raises(ProviderError, match=r"contents\[0\]\.parts"):
        gemini.parse({"contents": [{"role": "user"}]}, model="g")
    with pytest.raises(ProviderError, match="candidateCount"):
        gemini.parse(
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"candidateCount": 3}}, model="g"
        )


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "object", "required": [[]]}, r"required\[0\]"),
        ({"type": 5}, r"\.type"),
        ({"type": ["object", 1]}, r"type\[1\]"),
        ({"properties": []}, r"\.properties"),
        ({"properties": {"command": "string"}}, r"properties\.command"),
        ("object", "parameters"),
    ],
)
def test_malformed_tool_schemas_are_400_in_every_adapter(schema: Any, field: str) -> None:
    bodies = {
        openai_chat: {"messages": [{"role": "user", "content": "x"}],
                      "tools": [{"type": "function", "function": {"name": "t", "parameters": schema}}]},
        openai_responses: {"input": "x", "tools": [{"type": "function", "name": "t", "parameters": schema}]},
        anthropic_messages: {"messages": [{"role": "user", "content": "x"}],
                             "tools": [{"name": "t", "input_schema": schema}]},
        gemini: {"contents": [{"parts": [{"text": "x"}]}],
                 "tools": [{"functionDeclarations": [{"name": "t", "parameters": schema}]}]},
    }  # fmt: skip
    for adapter, body in bodies.items():
        pattern = field.replace("parameters", "input_schema") if adapter is anthropic_messages else field
        with pytest.raises(ProviderError, match=pattern) as caught:
            adapter.parse(body, model="m")
        assert caught.value.status == 400
