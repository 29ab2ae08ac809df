"""The token-faithful splice: which chain a call extends, and the exact prompt ids the model is given.

State: a rollout's chain **tips** (``ChainTip``) — per chain, digests of the last call's messages and of the reply we
sent, and the exact ids the model has seen in that chain (prompt ids + its own sampled ids). They live in Redis
(``services/gateway/tips.py``), so any gateway process can plan any call and a restarted gateway resumes; the
``Splicer`` here is pure: it decides and builds, the caller loads and commits.

A call is planned in three steps (``services/gateway/model_call.py``): ``choose`` (which tip, from digests only —
no ids, no tokenizer), load that tip's ids (local cache or Redis), ``plan`` (render + tokenize, in a worker
thread). After sampling, ``new_tip`` is committed by compare-and-set on the old tip's version.

Rules (docs/design.md#token-faithful-splice), applied to a new call with messages ``M`` and tools ``T``, messages compared by meaning
(``normalize.message_key``: tool-call arguments as parsed JSON, volatile per-harness lines normalized). Meaning is
compared through 16-byte digests; a message whose fields are byte-identical to the tip's (``raw`` digest) is equal
without normalizing it, so a long history costs one hash per call, not one normalization per message.

1. **Extend.** If some chain tip has ``M[:n] == tip.messages + [tip.reply]`` and ``T == tip.tools``, the call
   continues that chain (newest tip first):
   ``prompt_ids = tip.ids + closing + suffix`` where ``tip.ids`` is the tip's prompt ids followed by the ids the
   model sampled, ``closing`` is the template's end-of-turn token when the reply was cut by ``max_tokens`` (loss
   mask 0), and ``suffix`` is the template's rendering of ``M[n:]`` and the generation prompt, cut after the
   end-of-turn token that closed the reply (``ChatFormat.suffix_of``). The model is conditioned on its own
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
   render resumes after the previous call's render (``RetemplateCut``), so it costs O(new text) per call. Where
   that render agrees with the chain's own ids up to its cut (the usual case) any process can resume it; where it
   does not (the model formats differently from the template), only the process that rendered it can, and
   another renders from scratch once.
4. Two calls racing to extend the same tip (in one process or two): the first compare-and-set wins; the other
   becomes a ``retry`` fork with its full prompt as the new chain's first segment (the ids the model saw are kept
   either way). A tip never advances twice from one version.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Conversation, Message, ToolSpec
from services.gateway.normalize import conversation_tools_key, message_key, tools_key
from shared.inference_client import PromptIds

SpliceMode = Literal["splice", "retemplate"]
SPLICE_MODES: tuple[SpliceMode, ...] = ("splice", "retemplate")
DIGEST_BYTES = 16


def _digest(*parts: str) -> bytes:
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.digest()


def raw_digest(message: Message) -> bytes:
    """Every field of the message as given: equal raw digests mean equal meaning (no normalization needed)."""
    calls = [
        f"{c.id}\x01{c.name}\x01{c.kind}\x01"
        + (json.dumps(c.arguments, sort_keys=True) if isinstance(c.arguments, dict) else c.arguments)
        for c in message.tool_calls
    ]
    return _digest(
        message.role,
        message.content,
        message.tool_call_id or "",
        message.name or "",
        message.reasoning or "",
        *calls,
    )


def meaning_digest(message: Message) -> bytes:
    return _digest(repr(message_key(message)))


def tools_digest(tools: list[ToolSpec]) -> bytes:
    return _digest(tools_key(tools))


@dataclass(frozen=True)
class MessageDigest:
    role: str
    raw: bytes
    meaning: bytes


def digest_message(message: Message) -> MessageDigest:
    return MessageDigest(message.role, raw_digest(message), meaning_digest(message))


class ConversationDigest:
    """Digests of one request's messages; meaning digests are computed only where the raw ones differ from a tip's."""

    def __init__(self, conversation: Conversation) -> None:
        self.messages = conversation.messages
        self.roles = [m.role for m in self.messages]
        self.raw = [raw_digest(m) for m in self.messages]
        self._meaning: list[bytes | None] = [None] * len(self.messages)
        self.tools = _digest(conversation_tools_key(conversation))
        self.rendering: str | None = None
        """The template's text of the conversation once a plan rendered it (``Splicer.render_text``): a plan tried
        on the event loop and given up there (``TooLongForTheLoop``) is not rendered again in its thread."""

    def __len__(self) -> int:
        return len(self.messages)

    def meaning(self, index: int) -> bytes:
        value = self._meaning[index]
        if value is None:
            value = self._meaning[index] = meaning_digest(self.messages[index])
        return value

    def matches(self, index: int, other: MessageDigest) -> bool:
        if self.raw[index] == other.raw:
            if self._meaning[index] is None:
                self._meaning[index] = other.meaning
            return True
        return self.roles[index] == other.role and self.meaning(index) == other.meaning

    def undigested_chars(self) -> int:
        """Characters of content in the messages whose meaning digest ``digests`` has yet to compute."""
        return sum(
            len(m.content) + len(m.reasoning or "")
            for m, meaning in zip(self.messages, self._meaning, strict=True)
            if meaning is None
        )

    def digests(self) -> list[MessageDigest]:
        return [
            MessageDigest(r, raw, self.meaning(i))
            for i, (r, raw) in enumerate(zip(self.roles, self.raw, strict=True))
        ]


@dataclass(frozen=True, kw_only=True)
class RetemplateCut:
    """Where the from-scratch render of a tip's prompt can resume: its text up to the last end-of-turn token
    (``chars`` characters, digest ``text``) and the ids of that text (``count`` of them)."""

    chars: int
    text: bytes
    count: int
    ids: array[int] | None = None
    """None when they are the chain's own first ``count`` ids (no drift up to there; any process can resume);
    else the render's ids, which only the process that made them keeps (``tips.py``)."""


@dataclass(eq=False, kw_only=True)
class ChainTip:
    """The end of one chain: what the model saw and sampled last in it (ids are loaded separately)."""

    chain_id: int
    position: int
    call_id: int
    history: list[MessageDigest]
    """The last call's messages, then the reply we sent."""
    tools: bytes
    ids_len: int
    """Length of the chain so far: the last prompt's ids then the ids the model sampled."""
    prompt_len: int
    end_of_turns: int
    """End-of-turn tokens in the chain's ids (where the next suffix is cut)."""
    closed: bool
    """The last reply ended with the end-of-turn token (not cut by ``max_tokens``)."""
    seq: int = 0
    """Commit order within the rollout (newest tip = highest)."""
    retemplate: RetemplateCut | None = None


@dataclass(frozen=True)
class Retemplate:
    """A conversation rendered from scratch: the template's text and its ids (int32, as ``PromptIds`` packs them:
    compared, sliced and counted without conversions)."""

    text: str
    ids: array[int]


@dataclass(kw_only=True)
class Choice:
    """What ``Splicer.choose`` decided from digests: the tip to extend, or why the call forks."""

    extends: ChainTip | None
    newest: ChainTip | None
    fork_reason: str | None
    reuse_prompt: bool
    """A retry of the newest tip's exact messages (splice mode): the model is given the same prompt ids again."""

    @property
    def needs_ids(self) -> ChainTip | None:
        """The tip whose ids ``plan`` needs."""
        if self.extends is not None:
            return self.extends
        return self.newest if self.reuse_prompt else None


@dataclass(kw_only=True)
class SplicePlan:
    """Where a call goes and what the model is given; nothing is committed or recorded yet."""

    prompt: PromptIds
    suffix_ids: Sequence[int]
    """Prompt ids new to the chain (stored once): the full prompt for a new chain, else closing + suffix (an int32
    array where the plan has one: the token segment is written from its buffer, not from a list of ints)."""
    extends: ChainTip | None
    fork_reason: str | None
    parent_chain_id: int | None
    position: int
    parent_call_id: int | None = None
    """The call this one follows: the extended tip's call, or for a fork the rollout's newest call."""
    rendered: Retemplate | None = None
    """Set when ``prompt`` is itself a from-scratch render (nothing can drift)."""
    text: str | None = None
    """The template's rendering of the whole conversation where planning made it (a splice cuts its suffix from
    it): the drift check's from-scratch render is this same text, so it is not rendered twice."""

    @property
    def prompt_ids(self) -> list[int]:
        return self.prompt.ids.tolist()


def _system(keys: list[bytes], roles: Sequence[str]) -> list[bytes]:
    return [k for k, r in zip(keys, roles, strict=True) if r == "system"]


def _dialog(keys: list[bytes], roles: Sequence[str]) -> list[bytes]:
    return [k for k, r in zip(keys, roles, strict=True) if r != "system"]


def fork_reason(digest: ConversationDigest, tip: ChainTip) -> str:
    """Why the conversation does not extend ``tip`` (rule 2 of the module docstring)."""
    new = [digest.meaning(i) for i in range(len(digest))]
    old_digests = tip.history[:-1]
    old = [d.meaning for d in old_digests]
    old_roles = [d.role for d in old_digests]
    history = [d.meaning for d in tip.history]
    tools_differ = digest.tools != tip.tools
    system_differs = _system(new, digest.roles) != _system(old, old_roles)
    new_dialog = _dialog(new, digest.roles)
    old_dialog = _dialog(history, [d.role for d in tip.history])
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


def extends(digest: ConversationDigest, tip: ChainTip) -> bool:
    """Rule 1: the conversation is the tip's messages + our reply + new messages, with the same tools."""
    if digest.tools != tip.tools or len(digest) <= len(tip.history):
        return False
    return all(digest.matches(i, d) for i, d in enumerate(tip.history))


class Splicer:
    """Plans calls against chain tips (pure: no state, no I/O)."""

    def __init__(self, chat_format: ChatFormat, mode: SpliceMode = "splice") -> None:
        if mode not in SPLICE_MODES:
            raise ValueError(f"splice mode must be one of {SPLICE_MODES}, not {mode!r}")
        self.chat_format = chat_format
        self.mode = mode

    # --- deciding ----------------------------------------------------------------------------------------
    def choose(self, digest: ConversationDigest, tips: Sequence[ChainTip]) -> Choice:
        """The tip this call extends (newest first), or the fork it starts. ``tips`` oldest first."""
        newest = tips[-1] if tips else None
        for tip in reversed(tips):
            if extends(digest, tip):
                return Choice(extends=tip, newest=newest, fork_reason=None, reuse_prompt=False)
        return self._fork(digest, newest)

    def _fork(self, digest: ConversationDigest, newest: ChainTip | None) -> Choice:
        if newest is None:
            return Choice(extends=None, newest=None, fork_reason=None, reuse_prompt=False)
        reason = fork_reason(digest, newest)
        same_prompt = len(digest) == len(newest.history) - 1 and all(
            digest.matches(i, d) for i, d in enumerate(newest.history[:-1])
        )
        return Choice(
            extends=None,
            newest=newest,
            fork_reason=reason,
            reuse_prompt=reason == "retry" and same_prompt and self.mode == "splice",
        )

    # --- building (CPU work: in a thread, or on the event loop where it is small: model_call.py) ----------
    def plan(
        self,
        conversation: Conversation,
        digest: ConversationDigest,
        choice: Choice,
        tip_ids: PromptIds | None,
    ) -> SplicePlan:
        """The prompt for ``choice``; ``tip_ids`` are the ids of ``choice.needs_ids``."""
        if choice.extends is not None:
            assert tip_ids is not None
            plan = self._extend(conversation, digest, choice.extends, tip_ids)
            if plan is not None:
                return plan
            choice = self._fork(digest, choice.newest)  # retemplate mode: the tokens disagree
        newest = choice.newest
        if newest is None:
            rendered = self._render(conversation, digest)
            return SplicePlan(
                prompt=PromptIds(rendered.ids),
                suffix_ids=rendered.ids,
                extends=None,
                fork_reason=None,
                parent_chain_id=None,
                position=0,
                rendered=rendered,
            )
        if choice.reuse_prompt:
            assert tip_ids is not None
            prompt = PromptIds.of(tip_ids.ids[: newest.prompt_len])
            return SplicePlan(
                prompt=prompt,
                suffix_ids=prompt.ids,
                extends=None,
                fork_reason=choice.fork_reason,
                parent_chain_id=newest.chain_id,
                position=0,
                parent_call_id=newest.call_id,
            )
        rendered = self._render(conversation, digest)
        return SplicePlan(
            prompt=PromptIds(rendered.ids),
            suffix_ids=rendered.ids,
            extends=None,
            fork_reason=choice.fork_reason,
            parent_chain_id=newest.chain_id,
            position=0,
            parent_call_id=newest.call_id,
            rendered=rendered,
        )

    def render_text(self, conversation: Conversation, digest: ConversationDigest) -> str:
        """The template's text of ``conversation`` with the generation prompt, rendered once per call."""
        if digest.rendering is None:
            digest.rendering = self.chat_format.render_text(
                conversation.messages, conversation.tools, add_generation_prompt=True
            )
        return digest.rendering

    def _render(self, conversation: Conversation, digest: ConversationDigest) -> Retemplate:
        text = self.render_text(conversation, digest)
        return Retemplate(text, array("i", self.chat_format.encode_turns(text)))

    def _extend(
        self, conversation: Conversation, digest: ConversationDigest, tip: ChainTip, tip_ids: PromptIds
    ) -> SplicePlan | None:
        closing = [] if tip.closed else list(self.chat_format.closing_ids)
        if self.mode == "retemplate":
            rendered = self._render(conversation, digest)
            full = rendered.ids
            if full[: tip.ids_len] != tip_ids.ids:
                return None
            return SplicePlan(
                prompt=PromptIds(full),
                suffix_ids=full[tip.ids_len :],
                extends=tip,
                fork_reason=None,
                parent_chain_id=None,
                position=tip.position + 1,
                parent_call_id=tip.call_id,
                rendered=rendered,
            )
        text = self.render_text(conversation, digest)
        segment = closing + self.chat_format.suffix_of(text, tip.end_of_turns + len(closing))
        return SplicePlan(
            prompt=tip_ids + segment,
            suffix_ids=segment,
            extends=tip,
            fork_reason=None,
            parent_chain_id=None,
            position=tip.position + 1,
            parent_call_id=tip.call_id,
            text=text,
        )

    # --- after sampling ----------------------------------------------------------------------------------
    def new_tip(
        self,
        plan: SplicePlan,
        digest: ConversationDigest,
        reply: Message,
        sampled_ids: list[int],
        chain_id: int,
        call_id: int,
        retemplate: RetemplateCut | None = None,
    ) -> ChainTip:
        """The tip ``chain_id`` has once this call's reply is known."""
        eot = self.chat_format.end_of_turn_id
        before = plan.extends.end_of_turns if plan.extends is not None else 0
        # suffix_ids are the ids new to the chain: a new chain's whole prompt, or what this call appended
        counted = before + _count(plan.suffix_ids, eot) + _count(sampled_ids, eot)
        return ChainTip(
            chain_id=chain_id,
            position=plan.position,
            call_id=call_id,
            history=digest.digests() + [digest_message(reply)],
            tools=digest.tools,
            ids_len=len(plan.prompt) + len(sampled_ids),
            prompt_len=len(plan.prompt),
            end_of_turns=counted,
            closed=self.chat_format.closes_turn(sampled_ids),
            retemplate=retemplate,
        )

    def as_retry_fork(self, plan: SplicePlan) -> SplicePlan:
        """Rule 4: the tip moved on under us; keep the ids the model saw as a new chain's first segment."""
        parent = plan.extends.chain_id if plan.extends else plan.parent_chain_id
        return SplicePlan(
            prompt=plan.prompt,
            suffix_ids=plan.prompt.ids,
            extends=None,
            fork_reason="retry",
            parent_chain_id=parent,
            position=0,
            parent_call_id=plan.parent_call_id,
        )

    # --- drift (splice mode): the from-scratch render, compared --------------------------------------------
    def retemplate(
        self,
        conversation: Conversation,
        base: ChainTip | None,
        base_ids: PromptIds | None,
        text: str | None = None,
    ) -> Retemplate:
        """The from-scratch render of ``conversation`` (its template text, when the caller has it already),
        tokenized incrementally where it extends ``base``'s.

        Where the new text starts with the base render up to its last end-of-turn token (``base.retemplate``),
        only the text after that special token is tokenized (the same boundary argument as the splice's suffix);
        the ids before it are the chain's own where they agree, else the ones the cut kept."""
        if text is None:
            text = self.chat_format.render_text(
                conversation.messages, conversation.tools, add_generation_prompt=True
            )
        cut = base.retemplate if base is not None else None
        if cut is not None and len(text) >= cut.chars and _digest(text[: cut.chars]) == cut.text:
            if cut.ids is not None:
                return Retemplate(text, cut.ids + array("i", self.chat_format.encode(text[cut.chars :])))
            if base_ids is not None and len(base_ids) >= cut.count:
                head = base_ids.ids[: cut.count]
                return Retemplate(text, head + array("i", self.chat_format.encode(text[cut.chars :])))
        return Retemplate(text, array("i", self.chat_format.encode(text)))

    def drift(
        self, conversation: Conversation, plan: SplicePlan, base_ids: PromptIds | None
    ) -> tuple[bool, RetemplateCut | None]:
        """Whether rendering from scratch would have given other prompt ids than the ones the model saw, and
        where the next call's render can resume."""
        rendered = plan.rendered or self.retemplate(conversation, plan.extends, base_ids, plan.text)
        drifted = plan.rendered is None and rendered.ids != plan.prompt.ids
        return drifted, self.retemplate_cut(rendered, plan.prompt)

    def retemplate_cut(self, rendered: Retemplate, prompt: PromptIds) -> RetemplateCut | None:
        end = self.chat_format.end_of_turn
        cut = rendered.text.rfind(end)
        if cut < 0:
            return None
        cut += len(end)
        turns = rendered.text.count(end, 0, cut)
        ends = np.flatnonzero(np.frombuffer(rendered.ids, dtype=np.int32) == self.chat_format.end_of_turn_id)
        if len(ends) < turns:
            return None
        count = int(ends[turns - 1]) + 1
        head = rendered.ids[:count]
        own = head == prompt.ids[:count]
        return RetemplateCut(
            chars=cut, text=_digest(rendered.text[:cut]), count=count, ids=None if own else head
        )


def _count(ids: Sequence[int], token: int) -> int:
    if isinstance(ids, array):
        return int(np.count_nonzero(np.frombuffer(ids, dtype=np.int32) == token))
    return sum(1 for i in ids if i == token)
