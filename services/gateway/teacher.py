"""Teachers: who answers a rollout's model calls instead of the run's policy, and how a reply becomes student ids.

A run or eval that names a teacher (``shared/run_config.py: TeacherConfig``, bound to the rollout by
``binding.py``) is answered by it instead of the inference service. ``ModelCall.start`` asks ``Teachers.sample``
for the reply; everything before (binding, checks, the splice plan) and after (tool-call parsing, the tip's
commit, the record) is the same code a policy call runs, so the harness gets the reply in its own protocol and
the next call splices onto it.

- ``url``: the harness's conversation (messages, tools, the completion budget) is sent as an OpenAI chat request
  to ``<base_url>/chat/completions`` with the key from the gateway's environment variable ``api_key_env``; the
  reply's text, reasoning and tool calls become one assistant message.
- ``reference``: ``demonstrator.next_action`` acts out the rollout's own task's reference fix (its task row, looked
  up by the rollout the call is bound to, and for a bundled task its files after the fix; nothing else is read).

**As the student would have produced it.** The assistant message is rendered by the student's chat template after
the conversation (``ChatFormat.reply_text``: the text a model sampling after the generation prompt would have
produced, tool calls in the template's own format), tokenized, and closed with the end-of-turn id, as a policy's
sample ends. Those ids are the call's ``sampled_ids`` (``source = teacher``, no logprobs:
``shared/trajectory.py``), the tip's ids the next call's prompt extends, and their text is what the tool-call
parser reads, so the reply the harness gets is the one the ids say. A reply the template cannot render that way
(or whose text holds the end-of-turn token) is refused rather than recorded with ids the harness's history would
not re-render to.

Errors: a teacher that cannot be reached, times out, answers a non-2xx status or a body that is not a chat
completion, or a demonstrator that cannot act, is a ``ProviderError`` (502, 503 when unreachable or overloaded)
raised before anything is committed: the handler answers the harness in its shape, notes an incident
(``teacher_unavailable``) and records nothing. Messages never hold the teacher's URL or key (the harness sees
them).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.gateway.chat_format import ChatFormat, ChatFormatError, message_to_template, tool_to_template
from services.gateway.conversation import Conversation, Message, ProviderError, ToolCall
from services.gateway.demonstrator import CannotDemonstrate, next_action
from services.gateway.toolcalls import new_call_id
from shared.datasets import reference_files, reference_fix
from shared.models import Rollout
from shared.models import Task as TaskRow
from shared.run_config import TeacherConfig
from shared.tasks import Task

TEACHER_ERROR = "teacher_error"
"""``ProviderError.code`` of a call the teacher could not answer (the incident's cause is ``teacher_unavailable``)."""
REFERENCE_CACHE = 256
"""Rollouts whose reference task a gateway process keeps (one row read per rollout, not per call)."""


def teacher_error(status: int, message: str) -> ProviderError:
    return ProviderError(status, f"teacher: {message}", "api_error", code=TEACHER_ERROR)


@dataclass(frozen=True, kw_only=True)
class TeacherSample:
    """A teacher's reply as the student would have sampled it: its text (what the tool-call parser reads) and its
    ids (ending with the end-of-turn id)."""

    text: str
    ids: list[int]


@dataclass(frozen=True, kw_only=True)
class ReferenceTask:
    fix: str
    test_command: str
    fixed_files: dict[str, str] | None
    """The changed files' whole text after the fix, where known (a bundled task's own solution)."""


class Teachers:
    """A gateway process's teachers (``GatewayState.teachers``); used by the handlers' tasks, no shared mutable
    state but the reference tasks' cache."""

    def __init__(
        self, http: aiohttp.ClientSession, sessions: async_sessionmaker[AsyncSession], chat_format: ChatFormat
    ) -> None:
        self.http = http
        self.sessions = sessions
        self.chat_format = chat_format
        self._references: OrderedDict[str, ReferenceTask] = OrderedDict()

    async def sample(
        self,
        teacher: TeacherConfig,
        *,
        rollout_id: str,
        harness: str,
        conversation: Conversation,
        max_tokens: int,
    ) -> TeacherSample:
        """The teacher's next reply to ``conversation``, as student text and ids (``ProviderError`` when none)."""
        if teacher.kind == "reference":
            task = await self._reference(rollout_id)
            try:
                reply = next_action(
                    reference_fix=task.fix,
                    test_command=task.test_command,
                    fixed_files=task.fixed_files,
                    harness=harness,
                    conversation=conversation,
                    new_call_id=new_call_id,
                )
            except CannotDemonstrate as exc:
                raise teacher_error(502, f"the reference demonstrator cannot act here: {exc}") from None
        else:
            reply = await self._ask_url(teacher, conversation, max_tokens)
        return self.as_student(conversation, reply)

    def as_student(self, conversation: Conversation, reply: Message) -> TeacherSample:
        """``reply`` rendered by the student's chat template after ``conversation`` (the module docstring)."""
        chat_format = self.chat_format
        try:
            text = chat_format.reply_text(conversation.messages, conversation.tools, reply)
        except ChatFormatError as exc:
            raise teacher_error(502, f"the reply cannot be put in the student's chat format: {exc}") from None
        ids = chat_format.encode(text)
        if chat_format.end_of_turn_id in ids:
            raise teacher_error(502, f"the reply holds the end-of-turn token {chat_format.end_of_turn!r}")
        return TeacherSample(text=text, ids=ids + [chat_format.end_of_turn_id])

    async def _reference(self, rollout_id: str) -> ReferenceTask:
        """The rollout's own task's reference fix and test command (cached per rollout)."""
        found = self._references.get(rollout_id)
        if found is not None:
            self._references.move_to_end(rollout_id)
            return found
        async with self.sessions() as session:
            row = (
                await session.execute(
                    select(TaskRow.dataset, TaskRow.spec)
                    .join(Rollout, Rollout.task_id == TaskRow.id)
                    .where(Rollout.id == rollout_id)
                )
            ).first()
        if row is None:
            raise teacher_error(502, "the rollout's task is gone")
        task = Task.model_validate(row.spec)
        fix = reference_fix(row.dataset, task)
        if fix is None:  # the api refuses such runs; a task row changed since cannot be demonstrated
            raise teacher_error(502, f"task {task.instance_id} has no reference fix to demonstrate")
        fixed = None if task.patch.strip() else reference_files(row.dataset, task.instance_id)
        found = self._references[rollout_id] = ReferenceTask(
            fix=fix, test_command=task.test_command, fixed_files=fixed
        )
        while len(self._references) > REFERENCE_CACHE:
            self._references.popitem(last=False)
        return found

    async def _ask_url(self, teacher: TeacherConfig, conversation: Conversation, max_tokens: int) -> Message:
        assert teacher.base_url is not None
        headers = {"Content-Type": "application/json"}
        if teacher.api_key_env is not None:
            key = os.environ.get(teacher.api_key_env)
            if not key:
                raise teacher_error(
                    503, f"the gateway has no API key for the teacher (${teacher.api_key_env})"
                )
            headers["Authorization"] = f"Bearer {key}"
        body = chat_request(conversation, model=teacher.model or conversation.model, max_tokens=max_tokens)
        url = teacher.base_url.rstrip("/") + "/chat/completions"
        try:
            async with self.http.post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=teacher.timeout_s)
            ) as response:
                status, text = response.status, await response.text()
        except TimeoutError:
            raise teacher_error(503, f"no reply within {teacher.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise teacher_error(503, f"unreachable ({type(exc).__name__})") from None
        if status == 429 or status >= 500:
            raise teacher_error(503, f"the endpoint answered {status}: {_error_text(text)}")
        if status != 200:
            raise teacher_error(502, f"the endpoint refused the request with {status}: {_error_text(text)}")
        try:
            return reply_message(json.loads(text))
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise teacher_error(502, f"the endpoint's reply is not a chat completion: {exc}") from None


def _error_text(body: str) -> str:
    """The endpoint's own error message, short (its body may echo the request; never the URL or key we hold)."""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = body
    return str(message or "no message")[:300]


def chat_request(conversation: Conversation, *, model: str, max_tokens: int) -> dict[str, Any]:
    """The OpenAI chat request for ``conversation`` (whatever provider the harness spoke)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [_chat_message(m) for m in conversation.messages],
        "max_tokens": max_tokens,
        "stream": False,
    }
    if conversation.tools:
        body["tools"] = [tool_to_template(t) for t in conversation.tools]
    return body


def _chat_message(message: Message) -> dict[str, Any]:
    """The template's OpenAI-like message (``chat_format.message_to_template``) in the wire's spelling: tool-call
    arguments as JSON text, no ``reasoning_content`` (not a field the chat API takes)."""
    out = message_to_template(message)
    out.pop("reasoning_content", None)
    for call in out.get("tool_calls", []):
        call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    return out


def reply_message(body: dict[str, Any]) -> Message:
    """The assistant message of an OpenAI chat completion (``ValueError`` and friends when it is not one)."""
    message = body["choices"][0]["message"]
    if not isinstance(message, dict):
        raise ValueError("choices[0].message is not an object")
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise ValueError("choices[0].message.content is not text")
    calls = []
    for raw in message.get("tool_calls") or []:
        function = raw["function"]
        arguments = function.get("arguments") or "{}"
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        if not isinstance(parsed, dict):
            raise ValueError(f"the arguments of tool call {function.get('name')!r} are not a JSON object")
        calls.append(
            ToolCall(id=str(raw.get("id") or new_call_id()), name=str(function["name"]), arguments=parsed)
        )
    reasoning = message.get("reasoning_content") or message.get("reasoning") or None
    if not content and not calls:
        raise ValueError("the message has neither text nor tool calls")
    return Message(
        role="assistant",
        content=content,
        tool_calls=calls,
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )
