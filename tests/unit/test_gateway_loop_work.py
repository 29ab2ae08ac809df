"""Planning and the drift check run on the event loop where they are small and in a thread otherwise
(``model_call.on_the_loop_or_in_a_thread``): a long conversation, a long rendering or more tokenizing than
``LOOP_TOKENIZE_CHARS`` never holds the loop, and the result is the same either way."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message
from services.gateway.model_call import (
    LOOP_MESSAGES,
    LOOP_TEXT_CHARS,
    LOOP_TOKENIZE_CHARS,
    on_the_loop_or_in_a_thread,
)
from services.gateway.splice import ConversationDigest, Splicer

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def chat_format(tiny_model_dir: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir)


def conversation(messages: int) -> Conversation:
    return Conversation(
        provider_api="openai_chat",
        messages=[Message(role="user", content=f"turn {i}") for i in range(messages)],
    )


async def where(
    chat_format: ChatFormat, conv: Conversation, text: str, rendered: str | None = None, small: bool = True
):
    """(ran on the loop's thread, the ids) of encoding ``text`` through ``on_the_loop_or_in_a_thread``."""
    seen = []

    def work() -> list[int]:
        seen.append(threading.get_ident())
        return chat_format.encode(text)

    ids = await on_the_loop_or_in_a_thread(conv, work, text=rendered, small=small)
    return seen[-1] == threading.get_ident(), ids


async def test_small_work_runs_on_the_loop(chat_format: ChatFormat) -> None:
    text = "x = 1\n" * (LOOP_TOKENIZE_CHARS // 6)
    on_loop, ids = await where(chat_format, conversation(LOOP_MESSAGES), text, rendered="r" * LOOP_TEXT_CHARS)
    assert on_loop and ids == chat_format.tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("why", ["tokenizing", "messages", "rendering", "known to be large"])
async def test_bigger_work_runs_in_a_thread_with_the_same_result(chat_format: ChatFormat, why: str) -> None:
    text = "x = 1\n" * (LOOP_TOKENIZE_CHARS // 6 + (1 if why == "tokenizing" else 0))
    conv = conversation(LOOP_MESSAGES + (1 if why == "messages" else 0))
    rendered = "r" * (LOOP_TEXT_CHARS + (1 if why == "rendering" else 0))
    on_loop, ids = await where(chat_format, conv, text, rendered, small=why != "known to be large")
    assert not on_loop and ids == chat_format.tokenizer.encode(text, add_special_tokens=False)


async def test_an_error_on_the_loop_is_the_caller_s() -> None:
    def broken() -> None:
        raise ValueError("template refused")

    with pytest.raises(ValueError, match="template refused"):
        await on_the_loop_or_in_a_thread(conversation(2), broken)


async def test_a_plan_given_up_on_the_loop_is_not_rendered_again_in_its_thread(
    chat_format: ChatFormat, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a chain's first call with a new user turn too long to tokenize on the loop: the loop renders it, gives up
    # at the tokenizer, and the thread tokenizes that same rendering
    task = "\n".join(f"line {i}: fix the parser" for i in range(LOOP_TOKENIZE_CHARS // 10))
    conv = Conversation(
        provider_api="openai_chat",
        messages=[Message(role="system", content="Be terse."), Message(role="user", content=task)],
    )
    splicer = Splicer(chat_format)
    renders: list[bool] = []  # ran on the loop's thread, one per render
    render_text = chat_format.render_text

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        renders.append(threading.get_ident() == loop_thread)
        return render_text(*args, **kwargs)

    loop_thread = threading.get_ident()
    monkeypatch.setattr(chat_format, "render_text", counted)
    digest = ConversationDigest(conv)
    choice = splicer.choose(digest, [])
    threads: list[int] = []

    def build():  # type: ignore[no-untyped-def]
        threads.append(threading.get_ident())
        return splicer.plan(conv, digest, choice, None)

    plan = await on_the_loop_or_in_a_thread(conv, build)
    assert (
        len(threads) == 2 and threads[0] == loop_thread != threads[1]
    )  # tried on the loop, done in a thread
    assert renders == [True]
    monkeypatch.undo()
    whole = chat_format.encode(chat_format.render_text(conv.messages, conv.tools, add_generation_prompt=True))
    assert (
        list(plan.prompt.ids) == whole
        and plan.rendered is not None
        and plan.rendered.text == digest.rendering
    )
