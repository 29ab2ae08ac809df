"""Planning and the drift check run on the event loop where they are small and in a thread otherwise
(``model_call.on_the_loop_or_in_a_thread``): a long conversation, a long rendering or more tokenizing than
``LOOP_TOKENIZE_CHARS`` never holds the loop, and the result is the same either way."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat, TooLongForTheLoop, on_the_loop
from services.gateway.conversation import Conversation, Message
from services.gateway.model_call import (
    LOOP_MESSAGES,
    LOOP_TEXT_CHARS,
    LOOP_TOKENIZE_CHARS,
    on_the_loop_or_in_a_thread,
    tokenize_a_first_prompt,
)

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def chat_format(tiny_model_dir: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir)


def conversation(messages: int) -> Conversation:
    return Conversation("openai_chat", [Message("user", f"turn {i}") for i in range(messages)])


async def where(chat_format: ChatFormat, conv: Conversation, text: str, rendered: str | None = None):
    """(ran on the loop's thread, the ids) of encoding ``text`` through ``on_the_loop_or_in_a_thread``."""
    seen = []

    def work() -> list[int]:
        seen.append(threading.get_ident())
        return chat_format.encode(text)

    ids = await on_the_loop_or_in_a_thread(conv, work, text=rendered)
    return seen[-1] == threading.get_ident(), ids


async def test_small_work_runs_on_the_loop(chat_format: ChatFormat) -> None:
    text = "x = 1\n" * (LOOP_TOKENIZE_CHARS // 6)
    on_loop, ids = await where(chat_format, conversation(LOOP_MESSAGES), text, rendered="r" * LOOP_TEXT_CHARS)
    assert on_loop and ids == chat_format.tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("why", ["tokenizing", "messages", "rendering"])
async def test_bigger_work_runs_in_a_thread_with_the_same_result(chat_format: ChatFormat, why: str) -> None:
    text = "x = 1\n" * (LOOP_TOKENIZE_CHARS // 6 + (1 if why == "tokenizing" else 0))
    conv = conversation(LOOP_MESSAGES + (1 if why == "messages" else 0))
    rendered = "r" * (LOOP_TEXT_CHARS + (1 if why == "rendering" else 0))
    on_loop, ids = await where(chat_format, conv, text, rendered)
    assert not on_loop and ids == chat_format.tokenizer.encode(text, add_special_tokens=False)


async def test_an_error_on_the_loop_is_the_caller_s() -> None:
    def broken() -> None:
        raise ValueError("template refused")

    with pytest.raises(ValueError, match="template refused"):
        await on_the_loop_or_in_a_thread(conversation(2), broken)


# --- a chain's first prompt, tokenized while the binding is read ---------------------------------------------


def first_prompt(lines: int, *, answered: bool = False) -> Conversation:
    """A rollout's first request (system and user turns, a user turn of ``lines`` lines no cache has seen), or
    with ``answered`` the same after the model's reply and a new user turn."""
    messages = [
        Message("system", "You are terse."),
        Message("user", f"task {uuid.uuid4()}\n" + "def f(x):\n    return x + 1\n" * lines),
    ]
    if answered:
        messages += [Message("assistant", "done"), Message("user", "and now?")]
    return Conversation("openai_chat", messages)


def rendering(chat_format: ChatFormat, conv: Conversation) -> str:
    return chat_format.render_text(conv.messages, conv.tools, add_generation_prompt=True)


async def test_a_long_first_prompt_is_tokenized_in_a_thread_so_its_plan_fits_the_loop(
    chat_format: ChatFormat,
) -> None:
    conv = first_prompt(LOOP_TOKENIZE_CHARS // 10)
    text = rendering(chat_format, conv)
    with pytest.raises(TooLongForTheLoop), on_the_loop(LOOP_TOKENIZE_CHARS):
        chat_format.encode_turns(text)  # more than the loop may tokenize

    started = tokenize_a_first_prompt(chat_format, conv)
    assert started is not None
    encoded_by = await started
    with on_the_loop(0):  # every turn is in the turn cache now: the plan tokenizes nothing
        ids = chat_format.encode_turns(text)
    assert ids == encoded_by == chat_format.encode(text)
    assert tokenize_a_first_prompt(chat_format, conv) is None  # the group's next rollout: all on the loop


async def test_a_short_first_prompt_is_tokenized_on_the_loop_at_once(chat_format: ChatFormat) -> None:
    conv = first_prompt(2)
    assert tokenize_a_first_prompt(chat_format, conv) is None
    text = rendering(chat_format, conv)
    with on_the_loop(0):  # its turns were tokenized (and kept) by the call above
        ids = chat_format.encode_turns(text)
    assert ids == chat_format.encode(text)


@pytest.mark.parametrize("why", ["answered", "messages"])
async def test_a_conversation_that_may_extend_a_chain_is_left_to_its_plan(
    chat_format: ChatFormat, why: str
) -> None:
    conv = first_prompt(LOOP_TOKENIZE_CHARS // 10, answered=why == "answered")
    if why == "messages":
        conv.messages += [Message("user", f"more {i}") for i in range(LOOP_MESSAGES)]
    assert chat_format.turns is not None
    misses = chat_format.turns.misses
    assert tokenize_a_first_prompt(chat_format, conv) is None
    assert chat_format.turns.misses == misses  # nothing was tokenized
