"""The splice: every prompt extends the chain with the model's own sampled ids; every fork has its reason;
per-harness volatile lines are normalized by tested rules."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message, ToolCall, ToolSpec
from services.gateway.normalize import RULES, message_key, normalize_text
from services.gateway.splice import (
    ChainTip,
    ConversationDigest,
    RetemplateCut,
    SplicePlan,
    Splicer,
    raw_digest,
)
from services.gateway.tips import TipMoved, decode_tip, encode_tip
from shared.inference_client import PromptIds

pytestmark = pytest.mark.unit

BASH = ToolSpec(
    name="bash",
    description="Run a command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
READ = ToolSpec(
    name="read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
SYSTEM = Message(role="system", content="You are a coding agent.")
TASK = Message(role="user", content="Create hello.txt")


@pytest.fixture(scope="module")
def chat_format(tiny_model_dir: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir)


def conv(messages: list[Message], tools: list[ToolSpec] | None = None) -> Conversation:
    return Conversation(
        provider_api="openai_chat", messages=messages, tools=[BASH] if tools is None else tools
    )


class Driver:
    """Plays a harness and the gateway's commit: sends a conversation, 'samples' a reply as real ids, commits the
    new tip the way ``TipStore.commit`` does (compare-and-set on the tip; here in memory — the Redis store itself
    is tested in ``tests/integration/test_gateway_tips.py``)."""

    def __init__(self, chat_format: ChatFormat, mode: str = "splice") -> None:
        self.fmt = chat_format
        self.splicer = Splicer(chat_format, mode)  # type: ignore[arg-type]
        self.tips: list[ChainTip] = []
        self.ids: dict[int, PromptIds] = {}
        self.next_chain = 1
        self.next_call = 1

    def plan(self, conversation: Conversation) -> tuple[SplicePlan, ConversationDigest]:
        digest = ConversationDigest(conversation)
        choice = self.splicer.choose(digest, self.tips)
        needed = choice.needs_ids
        tip_ids = self.ids[needed.chain_id] if needed is not None else None
        return self.splicer.plan(conversation, digest, choice, tip_ids), digest

    def commit(
        self,
        plan: SplicePlan,
        digest: ConversationDigest,
        reply: Message,
        sampled: list[int],
        retemplate: RetemplateCut | None = None,
    ) -> ChainTip:
        if plan.extends is not None and plan.extends not in self.tips:
            raise TipMoved("the tip moved on")
        if plan.extends is not None:
            chain_id = plan.extends.chain_id
            self.tips.remove(plan.extends)
        else:
            chain_id, self.next_chain = self.next_chain, self.next_chain + 1
        tip = self.splicer.new_tip(plan, digest, reply, sampled, chain_id, self.next_call, retemplate)
        self.next_call += 1
        tip.seq = self.next_call
        self.tips.append(tip)
        self.ids[chain_id] = plan.prompt + sampled
        return tip

    def sample(self, reply: Message, cut: bool = False) -> list[int]:
        text = reply.content
        for tool_call in reply.tool_calls:
            payload = json.dumps({"name": tool_call.name, "arguments": tool_call.arguments})
            text += f"<tool_call>\n{payload}\n</tool_call>"
        return self.fmt.encode(text) + ([] if cut else [self.fmt.end_of_turn_id])

    def call(self, conversation: Conversation, reply: Message, *, cut: bool = False):  # type: ignore[no-untyped-def]
        plan, digest = self.plan(conversation)
        sampled = self.sample(reply, cut)
        self.commit(plan, digest, reply, sampled)
        return plan, sampled


def bash_reply(command: str) -> Message:
    return Message(
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="call_1", name="bash", arguments={"command": command})],
    )


def test_every_prompt_is_previous_prompt_plus_sampled_plus_suffix(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    messages = [SYSTEM, TASK]
    previous = None
    for turn in range(4):
        reply = bash_reply(f"echo {turn} > f{turn}.txt")
        plan, sampled = driver.call(conv(messages), reply)
        if previous is None:
            assert (
                plan.extends is None and plan.fork_reason is None and plan.prompt_ids == list(plan.suffix_ids)
            )
        else:
            prev_prompt, prev_sampled = previous
            assert plan.extends is not None and plan.position == turn
            assert plan.prompt_ids == prev_prompt + prev_sampled + list(plan.suffix_ids)
        previous = (plan.prompt_ids, sampled)
        # the harness echoes our reply with re-serialized JSON arguments and content null -> ""
        echo = Message(
            role="assistant",
            content="",
            tool_calls=[
                ToolCall(id="other_id", name="bash", arguments={"command": f"echo {turn} > f{turn}.txt"})
            ],
        )
        messages = messages + [echo, Message(role="tool", content=f"ok {turn}", tool_call_id="other_id")]


def test_only_messages_new_to_the_chain_are_left_to_digest(chat_format: ChatFormat) -> None:
    # what the gateway digests after the request is out, and how it decides where (model_call.LOOP_DIGEST_CHARS)
    driver = Driver(chat_format)
    first = conv([SYSTEM, TASK])
    assert ConversationDigest(first).undigested_chars() == len(SYSTEM.content) + len(TASK.content)
    reply = bash_reply("ls")
    driver.call(first, reply)
    output = Message(role="tool", content="a.txt\n" * 50, tool_call_id="call_1")
    digest = ConversationDigest(conv([SYSTEM, TASK, reply, output]))
    choice = driver.splicer.choose(digest, driver.tips)  # matching the tip's history takes its meanings
    assert choice.extends is not None and digest.undigested_chars() == len(output.content)
    digest.digests()
    assert digest.undigested_chars() == 0


def test_incremental_retemplate_equals_a_full_render(chat_format: ChatFormat) -> None:
    """The drift check tokenizes only what is new since the previous call's render; it must equal a full one."""
    driver = Driver(chat_format)
    messages = [SYSTEM, TASK]
    for turn in range(4):
        conversation = conv(messages)
        plan, digest = driver.plan(conversation)
        base_ids = driver.ids[plan.extends.chain_id] if plan.extends is not None else None
        if turn:
            assert plan.extends is not None and plan.extends.retemplate is not None  # the incremental path
        rendered = driver.splicer.retemplate(conversation, plan.extends, base_ids)
        assert list(rendered.ids) == chat_format.render_prompt(conversation)
        # the model's JSON escapes "é" where the template writes it: the chain drifts, the render still resumes
        drifted, cut = driver.splicer.drift(conversation, plan, base_ids)
        assert drifted == (turn > 0) and cut is not None and (cut.ids is None) == (turn == 0)
        driver.commit(
            plan, digest, bash_reply(f"echo {turn} é"), driver.sample(bash_reply(f"echo {turn} é")), cut
        )
        echo = Message(
            role="assistant",
            content="",
            tool_calls=[ToolCall(id="x", name="bash", arguments={"command": f"echo {turn} é"})],
        )
        messages = messages + [
            echo,
            Message(role="tool", content=f"out {turn}\n", tool_call_id="x"),
            Message(role="user", content="next"),
        ]


def test_the_drift_check_reuses_the_splice_s_rendering(chat_format: ChatFormat) -> None:
    """A spliced plan keeps the template's text it cut its suffix from; the drift check's from-scratch render is
    that text (one jinja render per call, not two), and its result is the one a fresh render gives."""
    driver = Driver(chat_format)
    driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    conversation = conv(
        [
            SYSTEM,
            TASK,
            bash_reply("ls"),
            Message(role="tool", content="a.txt\n", tool_call_id="call_1"),
            Message(role="user", content="go"),
        ]
    )
    plan, _ = driver.plan(conversation)
    assert plan.extends is not None
    assert plan.text == chat_format.render_text(
        conversation.messages, conversation.tools, add_generation_prompt=True
    )
    renders = []
    original = chat_format.render_text
    chat_format.render_text = lambda *a, **k: renders.append(1) or original(*a, **k)  # type: ignore[method-assign]
    try:
        reused = driver.splicer.drift(conversation, plan, driver.ids[1])
        assert renders == []
        fresh = driver.splicer.drift(conversation, replace(plan, text=None), driver.ids[1])
        assert renders == [1]
    finally:
        del chat_format.render_text
    assert reused == fresh and reused[1] is not None


def test_cut_reply_gets_closing_tokens(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    first, sampled = driver.call(
        conv([SYSTEM, TASK]), Message(role="assistant", content="I will think about"), cut=True
    )
    echo = Message(role="assistant", content="I will think about")
    plan, _ = driver.call(
        conv([SYSTEM, TASK, echo, Message(role="user", content="continue")]),
        Message(role="assistant", content="ok"),
    )
    assert plan.extends is not None
    assert plan.suffix_ids[0] == chat_format.end_of_turn_id  # closing token, loss mask 0
    assert plan.prompt_ids == first.prompt_ids + sampled + list(plan.suffix_ids)


def test_no_drift_when_rendering_matches(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    driver.call(conv([SYSTEM, TASK]), Message(role="assistant", content="hello"))
    conversation = conv(
        [SYSTEM, TASK, Message(role="assistant", content="hello"), Message(role="user", content="again")]
    )
    plan, _ = driver.plan(conversation)
    drifted, cut = driver.splicer.drift(conversation, plan, driver.ids[1])
    assert not drifted and cut is not None


def test_drift_when_the_model_formats_differently_from_the_template(chat_format: ChatFormat) -> None:
    """The model put two spaces in its JSON; the template would re-render one: splice keeps the model's."""
    driver = Driver(chat_format)
    plan1, digest1 = driver.plan(conv([SYSTEM, TASK]))
    reply = bash_reply("ls")
    sampled = chat_format.encode(
        '<tool_call>\n{"name":  "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    )
    driver.commit(plan1, digest1, reply, sampled + [chat_format.end_of_turn_id])
    conversation = conv([SYSTEM, TASK, reply, Message(role="tool", content="x", tool_call_id="call_1")])
    plan, _ = driver.plan(conversation)
    assert plan.extends is not None
    rendered = driver.splicer.retemplate(conversation, plan.extends, driver.ids[1])
    assert list(rendered.ids) == chat_format.render_prompt(conversation)
    drifted, cut = driver.splicer.drift(conversation, plan, driver.ids[1])
    assert drifted and cut is not None and cut.ids is not None  # the render's own ids, not the chain's


def test_retemplate_mode_forks_where_tokens_disagree(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format, "retemplate")
    plan1, digest1 = driver.plan(conv([SYSTEM, TASK]))
    reply = bash_reply("ls")
    odd = chat_format.encode('<tool_call>\n{"name":  "bash", "arguments": {"command": "ls"}}\n</tool_call>')
    driver.commit(plan1, digest1, reply, odd + [chat_format.end_of_turn_id])
    conversation = conv([SYSTEM, TASK, reply, Message(role="tool", content="x", tool_call_id="call_1")])
    plan, _ = driver.plan(conversation)
    assert plan.extends is None and plan.fork_reason == "edited_history"
    assert plan.prompt_ids == chat_format.render_prompt(conversation)


def _forked(chat_format: ChatFormat, second: Conversation) -> str | None:
    driver = Driver(chat_format)
    first = conv(
        [SYSTEM, TASK, bash_reply("ls"), Message(role="tool", content="a.txt", tool_call_id="call_1")]
    )
    driver.call(first, bash_reply("cat a.txt"))
    plan, _ = driver.plan(second)
    assert plan.extends is None
    assert plan.parent_chain_id == 1
    return plan.fork_reason


HISTORY = [SYSTEM, TASK, bash_reply("ls"), Message(role="tool", content="a.txt", tool_call_id="call_1")]
NEXT = [bash_reply("cat a.txt"), Message(role="tool", content="hi", tool_call_id="call_2")]

FORKS = {
    "retry": conv(HISTORY),
    "tools_changed": Conversation(provider_api="openai_chat", messages=HISTORY + NEXT, tools=[BASH, READ]),
    "system_changed": conv([Message(role="system", content="You are another agent.")] + HISTORY[1:] + NEXT),
    "subagent": Conversation(
        provider_api="openai_chat",
        messages=[Message(role="system", content="You explore."), Message(role="user", content="find x")],
        tools=[READ],
    ),
    "new_conversation": conv([SYSTEM, Message(role="user", content="Something else entirely")]),
    "truncated_history": conv([SYSTEM, Message(role="tool", content="a.txt", tool_call_id="call_1")] + NEXT),
    "compaction": conv(
        [SYSTEM, TASK, Message(role="assistant", content="Summary: listed files, found a.txt.")]
    ),
    "edited_history": conv(
        [SYSTEM, TASK, bash_reply("ls -la"), Message(role="tool", content="a.txt", tool_call_id="c")] + NEXT
    ),
}


@pytest.mark.parametrize("reason", sorted(FORKS))
def test_fork_reason(chat_format: ChatFormat, reason: str) -> None:
    assert _forked(chat_format, FORKS[reason]) == reason


def test_edited_reply_is_edited_history(chat_format: ChatFormat) -> None:
    """Claude rewrites the turn after an empty reply; a changed reply of ours is edited history, not a splice."""
    second = conv(
        HISTORY + [bash_reply("cat b.txt"), Message(role="tool", content="no", tool_call_id="call_2")]
    )
    assert _forked(chat_format, second) == "edited_history"


def test_retry_reuses_the_prompt_ids_the_model_saw(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    first, _ = driver.call(conv(HISTORY), bash_reply("cat a.txt"))
    retry, _ = driver.plan(conv(HISTORY))
    assert retry.fork_reason == "retry" and retry.prompt_ids == first.prompt_ids


def test_a_subagent_interleaved_with_the_main_agent_keeps_both_chains(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    main, _ = driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    sub_conversation = FORKS["subagent"]
    sub, _ = driver.call(sub_conversation, Message(role="assistant", content="found"))
    assert sub.fork_reason == "subagent"
    resumed, _ = driver.plan(
        conv([SYSTEM, TASK, bash_reply("ls"), Message(role="tool", content="x", tool_call_id="i")])
    )
    assert resumed.extends is not None and resumed.extends.chain_id == 1 and resumed.position == 1


def test_racing_calls_on_one_tip_become_a_retry_fork(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    second = conv([SYSTEM, TASK, bash_reply("ls"), Message(role="tool", content="x", tool_call_id="i")])
    plan_a, digest_a = driver.plan(second)
    plan_b, digest_b = driver.plan(second)
    driver.commit(plan_a, digest_a, Message(role="assistant", content="a"), [1, 2])
    with pytest.raises(TipMoved):
        driver.commit(plan_b, digest_b, Message(role="assistant", content="b"), [3, 4])
    fork = driver.splicer.as_retry_fork(plan_b)
    assert fork.fork_reason == "retry" and list(fork.suffix_ids) == plan_b.prompt_ids and fork.position == 0
    assert fork.parent_chain_id == 1


# --- normalization rules, one test each ------------------------------------------------------------------


def test_rules_are_named_for_their_harness() -> None:
    assert {rule.name for rule in RULES} == {
        "claude_billing_header",
        "claude_bare_date",
        "todays_date",
        "codex_current_date",
        "pi_current_date",
    }


def test_claude_billing_header_line_is_ignored() -> None:
    a = "x-anthropic-billing-header: cc_version=2.1.197.a1b; cc_entrypoint=sdk-cli;\nYou are Claude."
    b = "x-anthropic-billing-header: cc_version=2.1.197.ff0; cc_entrypoint=sdk-cli;\nYou are Claude."
    assert normalize_text(a) == normalize_text(b) == "You are Claude."


def test_claude_system_reminder_date_is_ignored() -> None:
    a = "<system-reminder>\n# currentDate\nToday's date is 2026-11-30.\n</system-reminder>\nfix it"
    b = "<system-reminder>\n# currentDate\nToday's date is 2026-12-01.\n</system-reminder>\nfix it"
    assert message_key(Message(role="user", content=a)) == message_key(Message(role="user", content=b))


def test_claude_bare_system_prompt_date_is_ignored() -> None:
    prompt = "You are a Claude agent, built on Anthropic's Claude Agent SDK.\nCWD: /workspace\nDate: {}"
    a, b = prompt.format("2026-11-30"), prompt.format("2026-12-01")
    assert message_key(Message(role="system", content=a)) == message_key(Message(role="system", content=b))
    assert normalize_text(a) != normalize_text(b.replace("/workspace", "/elsewhere"))


def test_qwen_startup_date_line_is_ignored() -> None:
    a = "This is the Qwen Code.\nToday's date is Monday, November 30, 2026.\nMy operating system is: linux"
    b = "This is the Qwen Code.\nToday's date is Tuesday, December 1, 2026.\nMy operating system is: linux"
    assert normalize_text(a) == normalize_text(b)


def test_codex_environment_context_date_is_ignored() -> None:
    a = "<environment_context><cwd>/w</cwd><current_date>2026-11-30</current_date></environment_context>"
    b = "<environment_context><cwd>/w</cwd><current_date>2026-12-01</current_date></environment_context>"
    assert normalize_text(a) == normalize_text(b)
    assert normalize_text(a) != normalize_text(b.replace("/w", "/x"))


def test_pi_current_date_line_is_ignored() -> None:
    assert normalize_text("Current date: 2026-11-30\ncwd: /w") == normalize_text(
        "Current date: 2026-12-01\ncwd: /w"
    )


def test_a_rule_skips_only_texts_its_pattern_cannot_match() -> None:
    """Each rule runs its pattern only on a text that holds its literal: over texts built from the pieces of every
    rule's matches and near-misses, the skip never changes the result."""
    import random

    pieces = [
        "x-anthropic-billing-header:", " cc=1;", "Today's date is ", "Monday, November 30, 2026.", "Date: ",
        "Date:", "2026-11-30", "<current_date>", "</current_date>", "Current date", " and time", ": ", "\n",
        "\n\n", "<", "ok", " ", "date is", "Current", "\nDate: 2026-11-30\n", "\nCurrent date: 2026-11-30\n",
    ]  # fmt: skip
    rng = random.Random(0)
    texts = ["".join(rng.choices(pieces, k=rng.randint(1, 12))) for _ in range(3000)]
    for rule in RULES:
        changed = 0
        for text in texts:
            want = rule.pattern.sub(rule.replacement, text)
            assert rule.apply(text) == want, (rule.name, text)
            changed += want != text
        assert changed > 50, rule.name  # the texts do hold matches of every rule


def test_a_rule_whose_literal_is_not_in_its_pattern_is_refused() -> None:
    import re

    from services.gateway.normalize import VolatileLineRule

    with pytest.raises(ValueError, match="not literal text"):
        VolatileLineRule(
            name="typo",
            harness="pi",
            pattern=re.compile(r"^Current date: .*"),
            replacement="x",
            literal="Current Date",
        )


def test_arguments_compare_as_json_and_ids_do_not_matter() -> None:
    ours = Message(
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="call_a", name="bash", arguments={"command": "ls", "timeout": 5})],
    )
    echo = Message(
        role="assistant",
        content="  ",
        tool_calls=[ToolCall(id="call_b", name="bash", arguments='{"timeout":5,"command":"ls"}')],
    )
    other = Message(
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="call_a", name="bash", arguments={"command": "ls", "timeout": 6})],
    )
    assert message_key(ours) == message_key(echo)
    assert message_key(ours) != message_key(other)


def test_real_edits_are_not_normalized_away() -> None:
    assert normalize_text("Today's date is 2026-11-30.\nuse tabs") != normalize_text(
        "Today's date is 2026-11-30.\nuse spaces"
    )


def test_retemplate_mode_extends_where_tokens_agree(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format, "retemplate")
    first, sampled = driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    conversation = conv(
        [SYSTEM, TASK, bash_reply("ls"), Message(role="tool", content="x", tool_call_id="call_1")]
    )
    plan, _ = driver.plan(conversation)
    assert plan.extends is not None and plan.position == 1
    assert plan.prompt_ids == chat_format.render_prompt(conversation)
    assert plan.prompt_ids == first.prompt_ids + sampled + list(plan.suffix_ids)


def test_prompt_ids_are_packed_with_their_json(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    first, sampled = driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    ids = driver.ids[1]
    assert ids.ids.itemsize == 4 and ids.ids.tolist() == first.prompt_ids + sampled
    assert json.loads(b"[" + ids.json + b"]") == first.prompt_ids + sampled
    assert json.loads(b"[" + (ids + [7, 8]).json + b"]") == first.prompt_ids + sampled + [7, 8]


def test_a_tip_survives_its_redis_encoding(chat_format: ChatFormat) -> None:
    driver = Driver(chat_format)
    driver.call(conv(HISTORY), bash_reply("cat a.txt"))
    (tip,) = driver.tips
    back = decode_tip(tip.chain_id, encode_tip(tip), tip.seq)
    assert back.history == tip.history and back.tools == tip.tools
    assert (back.position, back.call_id, back.ids_len, back.prompt_len, back.end_of_turns, back.closed) == (
        tip.position, tip.call_id, tip.ids_len, tip.prompt_len, tip.end_of_turns, tip.closed
    )  # fmt: skip
    assert len(encode_tip(tip)) < 400  # digests, not text: a long history stays small


def test_byte_identical_messages_are_not_normalized_again(chat_format: ChatFormat) -> None:
    """A history message equal byte for byte to the tip's matches on its raw digest alone; an echo that differs
    in bytes (re-serialized arguments, another call id) still matches by meaning."""
    driver = Driver(chat_format)
    driver.call(conv([SYSTEM, TASK]), bash_reply("ls"))
    echo = Message(
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="other", name="bash", arguments='{"command":"ls"}')],
    )
    digest = ConversationDigest(
        conv([SYSTEM, TASK, echo, Message(role="tool", content="x", tool_call_id="other")])
    )
    choice = driver.splicer.choose(digest, driver.tips)
    assert choice.extends is not None
    assert digest._meaning[0] is not None and digest._meaning[1] is not None  # adopted from the tip
    assert digest.raw[2] != raw_digest(bash_reply("ls")) and digest._meaning[2] is not None
