"""Chat formatting: the served model's tokenizer and chat template, owned by the gateway
(docs/design.md#token-faithful-splice).

``ChatFormat.load(model_dir)`` reads the tokenizer and its chat template once (transformers). It renders a
``Conversation`` to token ids (``render_prompt``), and — what the splice needs — the *suffix* that follows a closed
assistant turn (``suffix_of``): the template's text for the new messages (tool results, user turns) plus the
generation prompt, cut at the end-of-turn token that closed the assistant turn.

Why the suffix is exact: the boundary is the end-of-turn special token (``<|im_end|>`` for ChatML). A special token
splits the text before BPE runs, so tokenizing the text after it alone gives the same ids as tokenizing the whole
rendering and dropping the prefix ids. ``tests/unit/test_chat_format.py`` checks it for every template we ship.

A completion cut by ``max_tokens`` has no end-of-turn token; ``closing_ids`` are the tokens the template would have
written to close the turn. The splice appends them (loss mask 0) before the next suffix.

Rendering is CPU work (jinja + BPE); callers on the event loop run it in a thread (``asyncio.to_thread``), except
work small enough to cost less than the thread hop itself: inside ``on_the_loop(chars)`` at most ``chars``
characters are tokenized, and asking for more raises ``TooLongForTheLoop`` before any of it is done (the caller then
runs the whole thing in a thread). The tokenizer is thread-safe for encoding.

A whole prompt (a chain's first call) is tokenized a turn at a time (``encode_turns``): cut just after each
end-of-turn token — the boundary argument above, so the ids are the same — with each turn's ids kept in a small
cache (``TurnCache``). Tokenizing is nearly all of a chain start's cost (jinja is ~0.2 ms at 2k or 20k tokens; the
tokenizer ~1 µs a token, ~90 % of it the pre-tokenizer's regex, not BPE), and the turns repeat: every rollout of a
run starts with the harness's system turn and tools, and the G rollouts of a GRPO group send the same first prompt.
``load`` checks the cut on a rendering of its own and turns the cache off for a tokenizer where it would change the
ids. Text becomes ids through one ``Encoder`` (``encoders.py``, the tokenizer seam), which ``load`` chooses: tiktoken's
encoder built from the tokenizer's own vocabulary (``fast_bpe``: the same split and merges, about four times faster)
where the tokenizer is built from parts it runs the same way and ``load`` sees it give the tokenizer's ids on a probe;
otherwise, and for a text it leaves to the tokenizer (not NFC, a byte the vocabulary lacks), the Rust tokenizer's
ids-only batch call where ``load`` sees it agree with ``tokenizer.encode`` (no offsets or masks are computed: ~25 %
less time); else the tokenizer's own ``encode``. ``load(model_dir, plain=True)`` takes the plain path for every text
(the tokenizer's ``encode``, no halves): for tests and for ruling the fast paths out while debugging.

A long text (a fresh user turn, a big tool output) is encoded in two halves at once, one in a helper thread (the
Rust tokenizer and tiktoken release the GIL), cut just before an ASCII letter that follows a lone newline (``_LINE_START``).
That cut is a boundary of the pre-tokenizer for the split patterns on ``_SPLIT_SAFE`` (GPT-2's, Llama 3's, Qwen 2's:
no pattern's match holds a newline and a following letter, none looks past a newline that follows a non-space, and
ByteLevel without a prefix space and NFC act on each piece alone), BPE works a pre-token at a time, and no added
token holds a newline or strips whitespace, so the halves' ids are the whole text's. ``load`` reads the tokenizer's own description and turns the halves on only for a tokenizer built from those
parts, and checks them on a probe.
"""

from __future__ import annotations

import json
import os
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.gateway.conversation import Conversation, Message, ToolSpec
from services.gateway.encoders import Encoder, FastBPEEncoder, IdsOnlyEncoder, TokenizerEncoder
from services.gateway.fast_bpe import KNOWN_SPLITS, FastBPE, byte_level, pre_tokenizer_steps


class ChatFormatError(Exception):
    """The model directory has no usable tokenizer or chat template, or a conversation cannot be rendered."""


class TooLongForTheLoop(Exception):
    """Tokenizing this on the event loop would take longer than ``on_the_loop`` allows: run the work in a thread."""


class _LoopBudget(threading.local):
    left: int | None = None
    """Characters the current ``on_the_loop`` block may still tokenize (None: not in one; this thread may take its
    time)."""


_on_loop = _LoopBudget()


@contextmanager
def on_the_loop(chars: int) -> Iterator[None]:
    """Tokenize at most ``chars`` characters in this block (the event loop's thread); more raises
    ``TooLongForTheLoop`` before it is started. A turn another thread is encoding is not waited for here (that
    raises too)."""
    _on_loop.left = chars
    try:
        yield
    finally:
        _on_loop.left = None


def _spend(chars: int) -> None:
    left = _on_loop.left
    if left is not None:
        if chars > left:
            raise TooLongForTheLoop(f"{chars} characters to tokenize, {left} allowed on the event loop")
        _on_loop.left = left - chars


def tool_to_template(tool: ToolSpec) -> dict[str, Any]:
    """The OpenAI function-tool shape chat templates expect. A ``custom`` (freeform) tool takes one string."""
    parameters = tool.parameters
    if tool.kind == "custom":
        parameters = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "freeform input"}},
            "required": ["input"],
        }
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters or {}},
    }


def message_to_template(message: Message) -> dict[str, Any]:
    """The message shape of HF chat templates (OpenAI-like); arguments stay objects so ``tojson`` renders them."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, dict)
                    else {"input": call.arguments},
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    return out


# Split patterns whose matches never hold a newline and the letter after it (``_cut_in_half`` cuts there).
_SPLIT_SAFE = KNOWN_SPLITS

_HALVES_MIN_CHARS = 4096
"""Below this (~1k tokens, ~1 ms) the hand-off to a second thread costs about what the halves save."""
_HALVES_MIN_CHARS_FAST = 16384
"""The same through tiktoken (``fast_bpe``; ~4k tokens, ~0.6 ms): halves save ~15 % of the time above it and cost
time below it (0.215 against 0.230 ms at 1.5k tokens, 1.24 against 1.01 ms at 7.8k, on one AMD EPYC core)."""
_LINE_START = re.compile(r"(?<=\S)\n(?=[A-Za-z])")
r"""A lone newline between a non-space and an ASCII letter. (After a run of whitespace the cut is not exact: GPT-2's
``\s+(?!\S)`` splits ``"\n\nx"`` as ``"\n" "\n" "x"`` but a piece ending in ``"\n\n"`` as one ``"\n\n"``.)"""


def _splits_safely(described: dict[str, Any]) -> bool:
    """Whether a tokenizer (its ``tokenizer.json``) is built only from parts for which a cut at ``_LINE_START`` is a
    pre-token boundary (the module docstring)."""
    normalizer = described.get("normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        return False
    model = described.get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout"):
        return False
    for added in described.get("added_tokens") or []:
        if "\n" in added.get("content", "") or added.get("lstrip") or added.get("rstrip"):
            return False
    steps = pre_tokenizer_steps(described)
    if len(steps) == 1:  # GPT-2's pattern inside ByteLevel
        return byte_level(steps[0], use_regex=True)
    if len(steps) == 2:
        split, last = steps
        return (
            split.get("type") == "Split"
            and (split.get("pattern") or {}).get("Regex") in _SPLIT_SAFE
            and split.get("behavior") == "Isolated"
            and not split.get("invert")
            and byte_level(last, use_regex=False)
        )
    return False


def _cut_in_half(text: str) -> int:
    """An offset near the middle of ``text`` just before a letter that starts a line after a lone newline; 0 where
    there is none."""
    middle = len(text) // 2
    found = _LINE_START.search(text, middle)
    if found is None:
        before = text.rfind("\n", 0, middle)
        while before > 0 and not _LINE_START.match(text, before):
            before = text.rfind("\n", 0, before)
        return before + 1 if before > 0 else 0
    return found.start() + 1


_helpers: tuple[int, ThreadPoolExecutor] | None = None
_helpers_lock = threading.Lock()


def _helper_pool() -> ThreadPoolExecutor:
    """The process's helper threads for second halves (made again in a forked child: threads do not survive fork)."""
    global _helpers
    with _helpers_lock:
        if _helpers is None or _helpers[0] != os.getpid():
            _helpers = (
                os.getpid(),
                ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="bpe"),
            )
        return _helpers[1]


class TurnCache:
    """Token ids of rendered turns by their text, least recently used out first, bounded by the ids it holds.

    A turn is encoded once even when several threads ask for it at once (a GRPO group's rollouts send their first
    call together): the first encodes it, the others wait for its ids. Inside ``on_the_loop`` nothing waits: a turn
    another thread is encoding raises ``TooLongForTheLoop``, and one encoded there is not offered to waiters until it
    is done."""

    def __init__(self, max_ids: int = 1 << 20) -> None:
        self.max_ids = max_ids
        self._turns: OrderedDict[str, array[int]] = OrderedDict()
        self._pending: dict[str, Future[array[int]]] = {}
        self._ids = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def ids(self, turn: str, encode: Callable[[str], list[int]]) -> array[int]:
        on_loop = _on_loop.left is not None
        with self._lock:
            found = self._turns.get(turn)
            if found is not None:
                self._turns.move_to_end(turn)
                self.hits += 1
                return found
            pending = self._pending.get(turn)
            owner = pending is None
            if on_loop:
                if not owner:  # the event loop never waits for a thread's encoding
                    raise TooLongForTheLoop("another thread is encoding this turn")
            elif owner:
                self.misses += 1
                pending = self._pending[turn] = Future()
            else:
                self.hits += 1
        if on_loop:  # encoded with no pending entry: no thread ever waits for the event loop either
            # encode raises TooLongForTheLoop before any work where the turn is over the budget
            ids = array("i", encode(turn))
            with self._lock:
                self.misses += 1
                if turn not in self._turns and turn not in self._pending:
                    self._keep(turn, ids)
            return ids
        assert pending is not None
        if not owner:
            return pending.result()
        try:
            ids = array("i", encode(turn))
        except BaseException as exc:
            with self._lock:
                del self._pending[turn]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._pending[turn]
            self._keep(turn, ids)
        pending.set_result(ids)
        return ids

    def _keep(self, turn: str, ids: array[int]) -> None:
        if len(ids) > self.max_ids // 4:  # one huge turn (a tool's output) would push out everything else
            return
        self._turns[turn] = ids
        self._ids += len(ids)
        while self._ids > self.max_ids:
            _, dropped = self._turns.popitem(last=False)
            self._ids -= len(dropped)


@dataclass(kw_only=True)
class ChatFormat:
    """A tokenizer plus its chat template; the only place text becomes prompt token ids."""

    tokenizer: Any
    end_of_turn: str
    end_of_turn_id: int
    closing_ids: list[int]
    model_dir: Path
    encoder: Encoder
    """How a text becomes ids (``encoders.py``; ``_choose_encoder`` picks it)."""
    turns: TurnCache | None = field(default_factory=TurnCache)
    """``encode_turns``' cache; None where cutting at end-of-turn tokens would change the ids (``load`` checks)."""
    halves: bool = False
    """Whether a long text is encoded in two halves at once (``load`` checks that the cut is exact for this
    tokenizer)."""

    @classmethod
    def load(cls, model_dir: Path, *, plain: bool = False) -> ChatFormat:
        """The tokenizer and template in ``model_dir``; ``plain`` encodes every text with the tokenizer's own
        ``encode`` (no tiktoken, no ids-only call, no halves)."""
        from transformers import AutoTokenizer

        model_dir = Path(model_dir)
        if (
            not (model_dir / "tokenizer_config.json").is_file()
            and not (model_dir / "tokenizer.json").is_file()
        ):
            raise ChatFormatError(
                f"no tokenizer in {model_dir}; build the tiny model with `harnessrl model init-tiny` "
                "or set HARNESSRL_MODEL_DIR to a Hugging Face model directory"
            )
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        if not getattr(tokenizer, "chat_template", None):
            raise ChatFormatError(f"the tokenizer in {model_dir} has no chat template")
        end_of_turn = tokenizer.eos_token
        if not end_of_turn:
            raise ChatFormatError(f"the tokenizer in {model_dir} names no eos (end-of-turn) token")
        end_of_turn_id = tokenizer.convert_tokens_to_ids(end_of_turn)
        if not isinstance(end_of_turn_id, int):
            raise ChatFormatError(f"the eos token {end_of_turn!r} is not one token in {model_dir}")
        fmt = cls(
            tokenizer=tokenizer,
            end_of_turn=end_of_turn,
            end_of_turn_id=end_of_turn_id,
            closing_ids=[end_of_turn_id],
            model_dir=model_dir,
            encoder=TokenizerEncoder(tokenizer),
        )
        fmt._check_end_of_turn()
        if not plain:
            fmt._choose_encoder()
            fmt._use_halves()
        fmt._check_turn_cut()
        return fmt

    def _choose_encoder(self) -> None:
        """The one place the encoder is chosen: the fastest of ``encoders.py``'s that gives the plain encoder's ids
        on a probe covering special tokens, unicode, contractions and whitespace runs (transformers can add
        Python-side steps to a tokenizer; the probe decides). tiktoken falls back to the ids-only call where that
        agrees, else to the tokenizer's ``encode``."""
        plain = TokenizerEncoder(self.tokenizer)
        texts = self._probe_texts()
        expected = [plain.encode(t) for t in texts]
        fallback: Encoder = plain
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        batch = getattr(backend, "encode_batch_fast", None)
        if batch is not None:
            try:
                found = [list(e.ids) for e in batch(texts, add_special_tokens=False)]
            except Exception:  # an older tokenizers without the keyword, say: keep the plain path
                found = []
            if found == expected:
                fallback = IdsOnlyEncoder(batch)
        self.encoder = fallback
        fast = FastBPE.build(self._described())
        if fast is not None and [fast.encode(t) for t in texts] == expected:
            self.encoder = FastBPEEncoder(fast, fallback)

    def _probe_texts(self) -> list[str]:
        """Texts a faster encoder must give the tokenizer's ids for: a rendering with special tokens, added tokens,
        unicode, contractions and whitespace runs, pieces of it cut mid-way, and edge cases."""
        probe = self.render_text(
            [
                Message(role="system", content="Be terse.\n\n  Use tools."),
                Message(
                    role="user",
                    content=" fix  é 🙂\tdef f(x):\n    return x-1\r\n" + self.end_of_turn + "again",
                ),
                Message(role="assistant", content='<tool_call>\n{"name": "ls"}\n</tool_call>ok\n'),
                Message(role="user", content="\n  and now? 123456 ÅΩ ıİ can't WON'T 's\n\n\n  x\t\ty  \n"),
            ],
            [],
            add_generation_prompt=True,
        )
        return [probe, probe[: len(probe) // 2], probe[len(probe) // 3 :], " leading space", "", "\n" * 5]

    def _described(self) -> dict[str, Any]:
        """The Rust tokenizer's own description (its ``tokenizer.json``); empty where it has none."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        try:
            described = json.loads(backend.to_str()) if backend is not None else {}
        except Exception:  # a backend that cannot describe itself
            return {}
        return described if isinstance(described, dict) else {}

    def _use_halves(self) -> None:
        """Encode long texts in two halves at once where the tokenizer is built from parts for which the cut is
        exact (``_splits_safely``) and a probe with many cuts agrees."""
        if not _splits_safely(self._described()):
            return
        lines = [
            "def f(x):",
            "    return x-1",
            "Fix it.  é 🙂 ıİ ÅΩ 123456 can't won't",
            "\tindented",
            "",
            "x = [1, 2]",
            "  spaces",
            "end." + self.end_of_turn + "after",
        ]
        probe = "\n".join(lines * 8)
        whole = self.encode(probe)
        offsets = [m.start() + 1 for m in _LINE_START.finditer(probe)]
        for cut in offsets:
            if self.encode(probe[:cut]) + self.encode(probe[cut:]) != whole:
                return
        self.halves = True

    def _check_turn_cut(self) -> None:
        """Tokenizing a turn at a time must give the whole text's ids; where it does not, no turn cache."""
        text = self.render_text(
            [
                Message(role="system", content="Be terse.  "),
                Message(role="user", content=" list\n files é 🙂"),
                Message(role="assistant", content="ok\n"),
                Message(role="user", content="\n  and now?"),
            ],
            [
                ToolSpec(
                    name="bash",
                    description="Run a command",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
                )
            ],
            add_generation_prompt=True,
        )
        cache, self.turns = self.turns, None
        if cache is not None and self._encode_by_turn(text, TurnCache()) == self.encode(text):
            self.turns = cache

    def _check_end_of_turn(self) -> None:
        """The template must close an assistant turn with the end-of-turn token, or the splice cannot cut."""
        marker = "§turn-marker§"
        text = self.render_text(
            [Message(role="user", content="hi"), Message(role="assistant", content=marker)],
            [],
            add_generation_prompt=False,
        )
        after = text[text.rfind(marker) + len(marker) :]
        if not after.startswith(self.end_of_turn):
            raise ChatFormatError(
                f"chat template closes an assistant turn with {after[:20]!r}, not the eos token "
                f"{self.end_of_turn!r}; the splice needs an end-of-turn special token"
            )

    # --- rendering -----------------------------------------------------------------------------------
    def render_text(
        self, messages: list[Message], tools: list[ToolSpec], *, add_generation_prompt: bool
    ) -> str:
        try:
            text = self.tokenizer.apply_chat_template(
                [message_to_template(m) for m in messages],
                tools=[tool_to_template(t) for t in tools] or None,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
            )
        except Exception as exc:  # jinja raises anything the template author wrote (raise_exception, ...)
            raise ChatFormatError(f"chat template failed: {exc}") from exc
        return str(text)

    def encode(self, text: str) -> list[int]:
        _spend(len(text))
        if self.halves and len(text) >= self.halves_min_chars and (cut := _cut_in_half(text)) > 0:
            second = _helper_pool().submit(self.encoder.encode, text[cut:])
            return self.encoder.encode(text[:cut]) + second.result()
        return self.encoder.encode(text)

    @property
    def halves_min_chars(self) -> int:
        return _HALVES_MIN_CHARS_FAST if isinstance(self.encoder, FastBPEEncoder) else _HALVES_MIN_CHARS

    def encode_turns(self, text: str) -> list[int]:
        """``encode(text)``, a turn at a time through the turn cache (the module docstring says why it is exact)."""
        if self.turns is None:
            return self.encode(text)
        return self._encode_by_turn(text, self.turns)

    def _encode_by_turn(self, text: str, cache: TurnCache) -> list[int]:
        ids: list[int] = []
        start, end = 0, self.end_of_turn
        while start < len(text):
            found = text.find(end, start)
            stop = len(text) if found < 0 else found + len(end)
            ids += cache.ids(text[start:stop], self.encode)
            start = stop
        return ids

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    def render_prompt(self, conversation: Conversation) -> list[int]:
        """The whole conversation rendered from scratch, ending with the generation prompt."""
        return self.encode(
            self.render_text(conversation.messages, conversation.tools, add_generation_prompt=True)
        )

    def suffix_of(self, text: str, closed_turns: int) -> list[int]:
        """Ids of everything after the ``closed_turns``-th end-of-turn token of ``text``, a conversation's full
        rendering (``render_text`` with the generation prompt).

        ``closed_turns`` is the number of end-of-turn tokens in the chain so far (prompt and sampled ids); the
        caller counts them in ids, so how the template would re-render the model's own reply never matters.
        """
        cut = _nth_end(text, self.end_of_turn, closed_turns)
        if cut < 0:
            raise ChatFormatError(
                f"rendering has fewer than {closed_turns} end-of-turn tokens; the conversation does not extend the chain"
            )
        return self.encode(text[cut:])

    def reply_text(self, messages: list[Message], tools: list[ToolSpec], reply: Message) -> str:
        """The text a model would sample after ``messages``' generation prompt to give ``reply`` (its content,
        reasoning and tool calls in the template's own format), up to the end-of-turn token that closes it: the
        template's rendering with ``reply`` appended, after the rendering with the generation prompt. A teacher's
        reply is recorded as these ids (``teacher.py``). ``ChatFormatError`` when the template does not render the
        conversation with the reply as the prompt followed by the reply's turn."""
        prompt = self.render_text(messages, tools, add_generation_prompt=True)
        whole = self.render_text([*messages, reply], tools, add_generation_prompt=False)
        if not whole.startswith(prompt):
            raise ChatFormatError(
                "the template renders the earlier turns differently once the reply follows them"
            )
        after = whole[len(prompt) :]
        end = after.find(self.end_of_turn)
        if end < 0:
            raise ChatFormatError(f"the template does not close the reply with {self.end_of_turn!r}")
        return after[:end]

    def count_end_of_turn(self, ids: Sequence[int]) -> int:
        return sum(1 for i in ids if i == self.end_of_turn_id)

    def closes_turn(self, sampled_ids: list[int]) -> bool:
        return bool(sampled_ids) and sampled_ids[-1] == self.end_of_turn_id


def _nth_end(text: str, token: str, n: int) -> int:
    """Offset just after the ``n``-th occurrence of ``token`` (0 when n == 0, -1 when there are fewer)."""
    offset = 0
    for _ in range(n):
        found = text.find(token, offset)
        if found < 0:
            return -1
        offset = found + len(token)
    return offset
