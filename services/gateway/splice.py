"""The token-faithful splice: which chain a call extends, and the exact prompt ids the model is given.

State: ``Splicer`` keeps, per rollout session (the rollout key), the **tip** of every chain — the last call's messages and tools, the reply we
sent, and the exact ids the model has seen in that chain (prompt ids + its own sampled ids). It lives in the gateway
process; one asyncio task at a time plans or commits for a rollout (``rollout_lock``), while sampling runs unlocked.

Rules (DESIGN §2), applied to a new call with messages ``M`` and tools ``T``, messages compared by meaning
(``normalize.message_key``: tool-call arguments as parsed JSON, volatile per-harness lines normalized):

1. **Extend.** If some chain tip has ``M[:n] == tip.messages + [tip.reply]`` and ``T == tip.tools``, the call
   continues that chain (newest tip first):
   ``prompt_ids = tip.ids + closing + suffix`` where ``tip.ids`` is the tip's prompt ids followed by the ids the
   model sampled, ``closing`` is the template's end-of-turn token when the reply was cut by ``max_tokens`` (loss
   mask 0), and ``suffix`` is the template's rendering of ``M[n:]`` and the generation prompt, cut after the
   end-of-turn token that closed the reply (``ChatFormat.render_suffix``). The model is conditioned on its own
   sampled tokens, never on a re-tokenization of them.
2. **Fork.** Otherwise a new chain starts from a full render (a ``retry`` reuses the tip's prompt ids), its parent
   the newest tip's chain, with a reason found by comparing against that tip:
   - ``retry``: ``M`` equals the tip's messages (the same request again), or a strict prefix of them;
   - ``subagent``: tools and the system prompt both differ, or the system prompt and the first user message differ;
   - ``tools_changed``: only the tools differ;
   - ``system_changed``: the system prompt differs, the first user message does not;
   - ``truncated_history``: the non-system messages of ``M`` are a later slice of the tip's (oldest turns dropped);
   - ``new_conversation``: the first non-system message differs;
   - ``compaction``: ``M`` is shorter than the tip's history and rewrites part of it (a summary);
   - ``edited_history``: anything else that rewrites earlier messages (incl. our own reply).
   The first call of a rollout starts the root chain (no reason).
3. **Retemplate mode** renders every prompt from scratch; a call still extends a chain only where the token prefix
   matches (``prompt_ids[:len(tip.ids)] == tip.ids``), else it forks with ``edited_history``. In splice mode
   ``drift`` (the rendered-from-scratch ids differ from the spliced ones) is measured per call; the from-scratch
   render is tokenized incrementally against the previous call's (``Splicer.retemplate``).
4. Two calls racing to extend the same tip: the first to commit extends it; the other becomes a ``retry`` fork with
   its full prompt as the new chain's first segment (the ids the model saw are kept either way).
5. Tips live in the gateway process, keyed by rollout key: a gateway restart mid-rollout, or a second gateway
   process serving the same rollout, starts a new root chain for the calls that follow (recorded, never mixed).
"""

from __future__ import annotations

import asyncio
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message
from services.gateway.normalize import message_key, tools_key

SpliceMode = Literal["splice", "retemplate"]
SPLICE_MODES: tuple[SpliceMode, ...] = ("splice", "retemplate")
MAX_ROLLOUTS_KEPT = 4096


@dataclass(eq=False)
class ChainTip:
    """The end of one chain: what the model saw and sampled last in it."""

    chain_id: int
    position: int
    call_id: int
    messages: list[Message]
    tools_key: str
    reply: Message
    ids: array[int]
    """The chain so far: the last prompt's ids then the ids the model sampled (4 bytes per token)."""
    prompt_len: int
    closed: bool
    retemplate: Retemplate | None = None
    """The from-scratch render of this call's prompt, once known (makes the next drift check incremental)."""

    @property
    def prompt_ids(self) -> list[int]:
        return self.ids[: self.prompt_len].tolist()


@dataclass(frozen=True)
class Retemplate:
    """A conversation rendered from scratch: the template's text and its ids."""

    text: str
    ids: Sequence[int]

    def compact(self) -> Retemplate:
        """The same render with its ids packed (what a chain tip keeps)."""
        return self if isinstance(self.ids, array) else Retemplate(self.text, array("i", self.ids))


@dataclass
class SplicePlan:
    """Where a call goes and what the model is given; nothing is recorded until ``commit``."""

    prompt_ids: list[int]
    segment_prompt_ids: list[int]
    """Prompt ids new to the chain (stored once): the full prompt for a new chain, else closing + suffix."""
    extends: ChainTip | None
    fork_reason: str | None
    parent_chain_id: int | None
    position: int
    parent_call_id: int | None = None
    """The call this one follows: the extended tip's call, or for a fork the rollout's newest call."""
    rendered: Retemplate | None = None
    """Set when ``prompt_ids`` is itself a from-scratch render (nothing can drift)."""


@dataclass
class _RolloutTips:
    tips: list[ChainTip] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _system_keys(messages: list[Message]) -> list[tuple[object, ...]]:
    return [message_key(m) for m in messages if m.role == "system"]


def _dialog_keys(messages: list[Message]) -> list[tuple[object, ...]]:
    return [message_key(m) for m in messages if m.role != "system"]


def fork_reason(conversation: Conversation, tip: ChainTip) -> str:
    """Why ``conversation`` does not extend ``tip`` (rule 2 of the module docstring)."""
    new = [message_key(m) for m in conversation.messages]
    old = [message_key(m) for m in tip.messages]
    history = old + [message_key(tip.reply)]
    tools_differ = tools_key(conversation.tools) != tip.tools_key
    system_differs = _system_keys(conversation.messages) != _system_keys(tip.messages)
    new_dialog, old_dialog = _dialog_keys(conversation.messages), _dialog_keys(tip.messages + [tip.reply])
    first_differs = bool(new_dialog and old_dialog) and new_dialog[0] != old_dialog[0]
    if not tools_differ and (new == old or (len(new) < len(old) and old[: len(new)] == new)):
        return "retry"
    if (tools_differ and system_differs) or (system_differs and first_differs):
        return "subagent"
    if tools_differ:
        return "tools_changed"
    if system_differs:
        return "system_changed"
    if first_differs:
        for start in range(1, len(old_dialog)):
            width = min(len(new_dialog), len(old_dialog) - start)
            if width and new_dialog[:width] == old_dialog[start : start + width]:
                return "truncated_history"
        return "new_conversation"
    if len(new) < len(history):
        return "compaction"
    return "edited_history"


def extends(conversation: Conversation, tip: ChainTip) -> bool:
    """Rule 1: the conversation is the tip's messages + our reply + new messages, with the same tools."""
    if tools_key(conversation.tools) != tip.tools_key:
        return False
    history = tip.messages + [tip.reply]
    if len(conversation.messages) <= len(history):
        return False
    return all(message_key(a) == message_key(b) for a, b in zip(conversation.messages, history, strict=False))


class Splicer:
    """Chain tips of every live rollout (bounded; the least recently used rollouts are forgotten)."""

    def __init__(self, chat_format: ChatFormat, mode: SpliceMode = "splice") -> None:
        if mode not in SPLICE_MODES:
            raise ValueError(f"splice mode must be one of {SPLICE_MODES}, not {mode!r}")
        self.chat_format = chat_format
        self.mode = mode
        self._rollouts: OrderedDict[str, _RolloutTips] = OrderedDict()

    def _state(self, rollout_id: str) -> _RolloutTips:
        state = self._rollouts.get(rollout_id)
        if state is None:
            state = self._rollouts[rollout_id] = _RolloutTips()
            while len(self._rollouts) > MAX_ROLLOUTS_KEPT:
                self._rollouts.popitem(last=False)
        self._rollouts.move_to_end(rollout_id)
        return state

    def rollout_lock(self, rollout_id: str) -> asyncio.Lock:
        return self._state(rollout_id).lock

    def tips(self, rollout_id: str) -> list[ChainTip]:
        return list(self._state(rollout_id).tips)

    def plan(self, rollout_id: str, conversation: Conversation) -> SplicePlan:
        """Decide the chain and build the prompt ids (CPU work: run it in a thread, under ``rollout_lock``)."""
        tips = self._state(rollout_id).tips
        for tip in reversed(tips):
            if extends(conversation, tip):
                plan = self._extend(conversation, tip)
                if plan is not None:
                    return plan
                break
        if not tips:
            rendered = self._render(conversation)
            full = list(rendered.ids)
            return SplicePlan(full, full, None, None, None, 0, rendered=rendered)
        newest = tips[-1]
        reason = fork_reason(conversation, newest)
        same_prompt = [message_key(m) for m in conversation.messages] == [
            message_key(m) for m in newest.messages
        ]
        if reason == "retry" and same_prompt and self.mode == "splice":
            full = newest.prompt_ids
            return SplicePlan(full, full, None, reason, newest.chain_id, 0, newest.call_id)
        rendered = self._render(conversation)
        full = list(rendered.ids)
        return SplicePlan(full, full, None, reason, newest.chain_id, 0, newest.call_id, rendered=rendered)

    def _render(self, conversation: Conversation) -> Retemplate:
        text = self.chat_format.render_text(
            conversation.messages, conversation.tools, add_generation_prompt=True
        )
        return Retemplate(text, self.chat_format.encode(text))

    def _extend(self, conversation: Conversation, tip: ChainTip) -> SplicePlan | None:
        closing = [] if tip.closed else list(self.chat_format.closing_ids)
        if self.mode == "retemplate":
            rendered = self.retemplate(conversation, tip)
            full = list(rendered.ids)
            if full[: len(tip.ids)] != tip.ids.tolist():
                return None
            return SplicePlan(
                full, full[len(tip.ids) :], tip, None, None, tip.position + 1, tip.call_id, rendered=rendered
            )
        closed_turns = self.chat_format.count_end_of_turn(tip.ids) + len(closing)
        suffix = self.chat_format.render_suffix(conversation, closed_turns)
        segment = closing + suffix
        return SplicePlan(tip.ids.tolist() + segment, segment, tip, None, None, tip.position + 1, tip.call_id)

    def still_extendable(self, rollout_id: str, plan: SplicePlan) -> bool:
        """False when another call committed onto the same tip first (rule 4)."""
        return plan.extends is None or plan.extends in self._state(rollout_id).tips

    def commit(
        self,
        rollout_id: str,
        plan: SplicePlan,
        conversation: Conversation,
        reply: Message,
        sampled_ids: list[int],
        chain_id: int,
        call_id: int,
    ) -> ChainTip:
        """Record the new tip of ``chain_id`` after a call's reply is known (call under ``rollout_lock``)."""
        tips = self._state(rollout_id).tips
        if plan.extends is not None and plan.extends in tips:
            tips.remove(plan.extends)
        tip = ChainTip(
            chain_id=chain_id,
            position=plan.position,
            call_id=call_id,
            messages=list(conversation.messages),
            tools_key=tools_key(conversation.tools),
            reply=reply,
            ids=array("i", plan.prompt_ids + sampled_ids),
            prompt_len=len(plan.prompt_ids),
            closed=self.chat_format.closes_turn(sampled_ids),
            retemplate=plan.rendered.compact() if plan.rendered else None,
        )
        tips.append(tip)
        return tip

    def as_retry_fork(self, plan: SplicePlan) -> SplicePlan:
        """Rule 4: the tip moved on under us; keep the ids the model saw as a new chain's first segment."""
        parent = plan.extends.chain_id if plan.extends else plan.parent_chain_id
        return SplicePlan(plan.prompt_ids, plan.prompt_ids, None, "retry", parent, 0, plan.parent_call_id)

    def retemplate(self, conversation: Conversation, base: ChainTip | None) -> Retemplate:
        """The from-scratch render of ``conversation``, tokenized incrementally where it extends ``base``'s.

        Where the new text starts with the base render up to its last end-of-turn token, only the text after
        that special token is tokenized (the same boundary argument as the splice's suffix), so a chain's drift
        checks cost O(new text) per call instead of O(whole prompt)."""
        text = self.chat_format.render_text(
            conversation.messages, conversation.tools, add_generation_prompt=True
        )
        previous = base.retemplate if base is not None else None
        end = self.chat_format.end_of_turn
        if previous is not None and (cut := previous.text.rfind(end)) >= 0:
            cut += len(end)
            if text.startswith(previous.text[:cut]):
                turns = previous.text[:cut].count(end)
                seen = 0
                for index, token in enumerate(previous.ids):
                    seen += token == self.chat_format.end_of_turn_id
                    if seen == turns:
                        return Retemplate(
                            text, list(previous.ids[: index + 1]) + self.chat_format.encode(text[cut:])
                        )
        return Retemplate(text, self.chat_format.encode(text))

    def drift(self, conversation: Conversation, plan: SplicePlan) -> tuple[bool, Retemplate]:
        """Whether rendering from scratch would have given other prompt ids than the ones the model saw, and
        that render (kept on the new tip for the next check)."""
        if plan.rendered is not None:
            return False, plan.rendered
        rendered = self.retemplate(conversation, plan.extends)
        return list(rendered.ids) != plan.prompt_ids, rendered
