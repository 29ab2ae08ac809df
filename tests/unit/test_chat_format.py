"""Chat formatting: the suffix after a closed assistant turn tokenizes exactly like the tail of the whole render,
for every template we ship (the tiny model's, tied and untied builds)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from services.gateway.chat_format import ChatFormat, ChatFormatError, _cut_in_half
from services.gateway.conversation import Conversation, Message, ToolCall, ToolSpec
from services.gateway.encoders import FastBPEEncoder, IdsOnlyEncoder, TokenizerEncoder

pytestmark = pytest.mark.unit

BASH = ToolSpec(
    name="bash",
    description="Run a command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
PATCH = ToolSpec(name="apply_patch", description="Edit files", kind="custom")


@pytest.fixture(scope="module", params=["untied", "tied"])
def chat_format(request, tiny_model_dir: Path, tiny_model_dir_tied: Path) -> ChatFormat:
    return ChatFormat.load(tiny_model_dir if request.param == "untied" else tiny_model_dir_tied)


def _call(name: str, arguments: dict | str, kind: str = "function") -> Message:
    return Message(
        role="assistant",
        content="",
        tool_calls=[ToolCall(id="c1", name=name, arguments=arguments, kind=kind)],
    )  # type: ignore[arg-type]


HISTORIES = {
    "tool_result": [Message(role="tool", content="a\nb  é 🙂", tool_call_id="c1")],
    "two_tool_results": [
        Message(role="tool", content="one", tool_call_id="c1"),
        Message(role="tool", content="two", tool_call_id="c2"),
    ],
    "user_turn": [Message(role="user", content="and now?")],
    "tool_then_user": [
        Message(role="tool", content="x", tool_call_id="c1"),
        Message(role="user", content="  spaced  \n"),
    ],
    "system_mid": [Message(role="system", content="reminder"), Message(role="user", content="go")],
}


@pytest.mark.parametrize("history", sorted(HISTORIES))
@pytest.mark.parametrize("tools", [[], [BASH, PATCH]], ids=["no_tools", "tools"])
def test_suffix_ids_equal_whole_minus_prefix(
    chat_format: ChatFormat, history: str, tools: list[ToolSpec]
) -> None:
    head = [Message(role="system", content="You are terse."), Message(role="user", content="list files")]
    reply = _call("bash", {"command": "ls -la"}) if tools else Message(role="assistant", content="Sure: ls")
    whole = Conversation(
        provider_api="openai_chat", messages=head + [reply] + HISTORIES[history], tools=tools
    )
    prefix_text = chat_format.render_text(head + [reply], tools, add_generation_prompt=False)
    whole_ids = chat_format.render_prompt(whole)
    closed = chat_format.count_end_of_turn(chat_format.encode(prefix_text))
    text = chat_format.render_text(whole.messages, tools, add_generation_prompt=True)
    suffix = chat_format.suffix_of(text, closed)
    cut = len(whole_ids) - len(suffix)
    assert whole_ids[cut:] == suffix
    # the boundary is right after the end-of-turn token that closed the assistant turn
    assert whole_ids[cut - 1] == chat_format.end_of_turn_id
    assert chat_format.count_end_of_turn(whole_ids[:cut]) == closed
    assert chat_format.decode(suffix).endswith("<|im_start|>assistant\n")


def test_closing_ids_are_the_end_of_turn_token(chat_format: ChatFormat) -> None:
    assert chat_format.closing_ids == [chat_format.end_of_turn_id]
    assert chat_format.end_of_turn == "<|im_end|>"
    assert chat_format.closes_turn([5, chat_format.end_of_turn_id])
    assert not chat_format.closes_turn([5, 6])
    assert not chat_format.closes_turn([])


def test_suffix_needs_enough_closed_turns(chat_format: ChatFormat) -> None:
    text = chat_format.render_text([Message(role="user", content="hi")], [], add_generation_prompt=True)
    with pytest.raises(ChatFormatError, match="end-of-turn"):
        chat_format.suffix_of(text, 5)


def test_missing_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChatFormatError, match="init-tiny"):
        ChatFormat.load(tmp_path)


def test_template_without_end_of_turn_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_model_dir / name).exists():
            shutil.copy(tiny_model_dir / name, tmp_path / name)
    (tmp_path / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    )
    with pytest.raises(ChatFormatError, match="end-of-turn"):
        ChatFormat.load(tmp_path)


@pytest.mark.parametrize("history", sorted(HISTORIES))
@pytest.mark.parametrize("tools", [[], [BASH, PATCH]], ids=["no_tools", "tools"])
def test_a_turn_at_a_time_gives_the_whole_texts_ids_cold_and_cached(
    chat_format: ChatFormat, history: str, tools: list[ToolSpec]
) -> None:
    head = [Message(role="system", content="You are terse."), Message(role="user", content="list files")]
    reply = _call("bash", {"command": "ls -la"}) if tools else Message(role="assistant", content="Sure: ls")
    text = chat_format.render_text(head + [reply] + HISTORIES[history], tools, add_generation_prompt=True)
    assert chat_format.turns is not None
    fresh = ChatFormat.load(chat_format.model_dir)
    assert fresh.turns is not None
    assert fresh.encode_turns(text) == chat_format.encode(text)  # every turn a miss
    hits = fresh.turns.hits
    assert fresh.encode_turns(text) == chat_format.encode(text)  # every turn from the cache
    assert fresh.turns.hits - hits == text.count(chat_format.end_of_turn) + 1


def test_the_turn_cache_drops_least_recently_used_turns_and_keeps_no_huge_one() -> None:
    from services.gateway.chat_format import TurnCache

    encoded: list[str] = []

    def encode(turn: str) -> list[int]:
        encoded.append(turn)
        return list(range(26 if turn == "huge" else 20))

    cache = TurnCache(max_ids=100)
    for turn in ("a", "b", "a", "c", "d", "e"):  # 100 ids: all fit; "b" is the least recently used
        cache.ids(turn, encode)
    cache.ids("f", encode)  # over the budget: "b" goes first
    assert encoded == ["a", "b", "c", "d", "e", "f"]
    for turn in ("a", "c", "d", "e", "f", "b"):
        cache.ids(turn, encode)
    assert encoded[-1] == "b" and len(encoded) == 7
    cache.ids("huge", encode)  # more than a quarter of the budget: encoded, never kept
    cache.ids("huge", encode)
    assert encoded[-2:] == ["huge", "huge"]


def test_a_turn_asked_for_by_many_threads_at_once_is_encoded_once() -> None:
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from services.gateway.chat_format import TurnCache

    calls = []
    started = threading.Event()

    def slow_encode(turn: str) -> list[int]:
        calls.append(turn)
        started.set()
        time.sleep(0.3)
        return [1, 2, 3]

    cache = TurnCache()
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(cache.ids, "system turn", slow_encode)
        started.wait(5)
        others = [pool.submit(cache.ids, "system turn", slow_encode) for _ in range(7)]
        results = [first.result(5)] + [f.result(5) for f in others]
    assert calls == ["system turn"]
    assert all(r.tolist() == [1, 2, 3] for r in results)
    assert (cache.misses, cache.hits) == (1, 7)


def test_a_failed_encode_reaches_every_waiter_and_is_not_kept() -> None:
    from services.gateway.chat_format import TurnCache

    def broken(turn: str) -> list[int]:
        raise RuntimeError("tokenizer failed")

    cache = TurnCache()
    with pytest.raises(RuntimeError, match="tokenizer failed"):
        cache.ids("t", broken)
    assert cache.ids("t", lambda turn: [5]).tolist() == [5]


def test_a_tokenizer_that_marks_the_start_of_every_text_gets_no_turn_cache(tiny_model_dir: Path) -> None:
    # SentencePiece tokenizers put a word-start marker on the start of each text they encode: tokenizing a turn at
    # a time would then differ from the whole text, and the check at load must see it.
    class MarksEachStart(ChatFormat):
        def encode(self, text: str) -> list[int]:
            return [7] + super().encode(text)

    base = ChatFormat.load(tiny_model_dir)
    marked = MarksEachStart(
        tokenizer=base.tokenizer,
        end_of_turn=base.end_of_turn,
        end_of_turn_id=base.end_of_turn_id,
        closing_ids=base.closing_ids,
        model_dir=base.model_dir,
        encoder=base.encoder,
    )
    marked._check_turn_cut()
    assert marked.turns is None
    text = base.render_text(
        [Message(role="user", content="hi"), Message(role="assistant", content="yo")],
        [],
        add_generation_prompt=True,
    )
    assert marked.encode_turns(text) == marked.encode(text)


@pytest.mark.parametrize("model", ["tiny", "small"])
def test_the_ids_only_path_gives_the_tokenizers_ids(
    model: str, tiny_model_dir: Path, small_model_dir: Path
) -> None:
    fmt = ChatFormat.load(tiny_model_dir if model == "tiny" else small_model_dir)
    assert isinstance(fmt.encoder, FastBPEEncoder)
    ids_only = fmt.encoder.fallback
    assert isinstance(ids_only, IdsOnlyEncoder)  # both tokenizers ship a Rust backend that agrees
    texts = [
        fmt.render_text(
            [
                Message(role="system", content="Be terse."),
                Message(role="user", content=text),
                _call("bash", {"command": "ls"}),
            ],
            [BASH],
            add_generation_prompt=True,
        )
        for text in ("fix  it\n\n\tnow", "é 🙂 ıİ ÅΩ 12345678", "  \r\n  x", "<|im_end|> inside text", "")
    ]
    for text in texts + [t[: len(t) // 3] for t in texts]:
        assert ids_only.encode(text) == fmt.tokenizer.encode(text, add_special_tokens=False)
        assert fmt.encode(text) == fmt.tokenizer.encode(text, add_special_tokens=False)


def test_a_tokenizer_without_an_agreeing_ids_only_path_keeps_the_plain_one(tiny_model_dir: Path) -> None:
    base = ChatFormat.load(tiny_model_dir)

    class Shifted:  # a Rust backend whose ids-only call disagrees with encode
        def encode_batch_fast(self, texts: list[str], add_special_tokens: bool) -> list[object]:
            return base.tokenizer.backend_tokenizer.encode_batch([t + "!" for t in texts])

    class Wrapped:
        backend_tokenizer = Shifted()
        chat_template = base.tokenizer.chat_template

        def __getattr__(self, name: str) -> object:
            return getattr(base.tokenizer, name)

    fmt = ChatFormat(
        tokenizer=Wrapped(),
        end_of_turn=base.end_of_turn,
        end_of_turn_id=base.end_of_turn_id,
        closing_ids=base.closing_ids,
        model_dir=base.model_dir,
        encoder=TokenizerEncoder(Wrapped()),
    )
    fmt._choose_encoder()
    assert isinstance(
        fmt.encoder, TokenizerEncoder
    )  # (its backend cannot describe itself: no tiktoken either)
    assert fmt.encode("a b") == base.tokenizer.encode("a b", add_special_tokens=False)


def _long_texts() -> list[str]:
    """Long texts of the kinds a prompt holds: code, prose, unicode, whitespace runs, special tokens."""
    code = "\n".join(
        f"def f{i}(x):\n    '''Doc é {i}.'''\n\tif x > {i}:\n        return x - {i}  # can't\n\n  y = [{i}, 'ıİ']"
        for i in range(200)
    )
    prose = " ".join(f"Word{i} 🙂 ÅΩ  \r\n" if i % 7 == 0 else f"word{i}" for i in range(3000))
    return [
        code,
        prose,
        "\n\n".join(f"Paragraph {i} ends here.\nIt goes on" for i in range(600)),
        "x" * 9000,  # no line starts at all: one piece
        "\n" + "a\n" * 4000,
        "<|im_start|>user\n" + code + "<|im_end|>\n<|im_start|>assistant\n",
        code.replace("\n", "\n\n  "),  # every line start follows spaces: no cut
    ]


@pytest.mark.parametrize("encoder", ["rust", "tiktoken"])
@pytest.mark.parametrize("model", ["tiny", "small"])
def test_long_texts_encoded_in_halves_give_the_tokenizers_ids(
    model: str, encoder: str, tiny_model_dir: Path, small_model_dir: Path
) -> None:
    fmt = ChatFormat.load(tiny_model_dir if model == "tiny" else small_model_dir)
    assert fmt.halves and isinstance(fmt.encoder, FastBPEEncoder)  # both built from parts on the allow lists
    if encoder == "rust":
        fmt.encoder = fmt.encoder.fallback
    for text in _long_texts():
        assert fmt.encode(text) == fmt.tokenizer.encode(text, add_special_tokens=False)
    rng = random.Random(0)  # and random texts over the characters that decide where pre-tokens end
    halved = 0
    for _ in range(40):
        text = "".join(
            rng.choices(
                _PRE_TOKEN_ENDS, k=rng.randint(fmt.halves_min_chars * 5 // 8, fmt.halves_min_chars * 5 // 4)
            )
        )
        halved += len(text) >= fmt.halves_min_chars and _cut_in_half(text) > 0
        assert fmt.encode(text) == fmt.tokenizer.encode(text, add_special_tokens=False)
    assert halved >= 25  # the random texts do take the halves path


_PRE_TOKEN_ENDS = [
    "a",
    "Z",
    "é",
    "ı",
    "1",
    "23",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    ":",
    "'s",
    "🙂",
    "(",
    "<|im_end|>",
]
"""Pieces of text (1.8 characters on average) around which pre-tokens start and end."""


@pytest.mark.parametrize("model", ["tiny", "small"])
def test_tiktoken_gives_the_tokenizers_ids(model: str, tiny_model_dir: Path, small_model_dir: Path) -> None:
    """The fast path over the tokenizer's own vocabulary agrees with the tokenizer on code (the stdlib's email,
    asyncio and encodings packages: ASCII, latin-1 and CJK tables), prose, special and added tokens, whitespace runs
    and random unicode, and leaves to the tokenizer the texts it must (checked by ``fast.encode`` giving None)."""
    import email
    import unicodedata

    fmt = ChatFormat.load(tiny_model_dir if model == "tiny" else small_model_dir)
    assert isinstance(fmt.encoder, FastBPEEncoder)
    fast = fmt.encoder.fast

    def agrees(text: str) -> bool:
        return fmt.encode(text) == fmt.tokenizer.encode(text, add_special_tokens=False)

    stdlib = Path(email.__file__).parent.parent
    files = [
        p for package in ("email", "asyncio", "encodings") for p in sorted((stdlib / package).glob("*.py"))
    ]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    assert len(texts) > 150 and any(not t.isascii() for t in texts)
    texts += _long_texts() + ["<tool_call>\n{}\n</tool_call>", "<|im_start|>x<|im_end|><|im_end|>", " ", ""]
    rng = random.Random(1)
    letters = [
        chr(c) for c in [*range(0x20, 0x2500), *range(0x1F300, 0x1F700), 0x20000] if not 0xD800 <= c < 0xE000
    ]
    for _ in range(300):
        mixed = rng.choices(letters + _PRE_TOKEN_ENDS * 20, k=rng.randint(1, 300))
        texts.append(unicodedata.normalize("NFC", "".join(mixed)))
    taken = 0
    for text in texts:
        taken += fast.encode(text) is not None
        assert agrees(text), text[:200]
    assert taken >= len(texts) - 10  # nearly all of them through tiktoken
    # left to the tokenizer: a text that is not NFC (the tiny tokenizer normalizes), a lone surrogate, and a
    # character with a byte SmolLM2's vocabulary lacks (a control character; a lead byte F1 or F2)
    left = ["cafe\u0301 \u212b", "x\ud800y"] if model == "tiny" else ["a\x04b", "é \U00044444", "x\ud800y"]
    for text in left:
        assert fast.encode(text) is None
        if "\ud800" not in text:
            assert agrees(text)


def test_tiktoken_is_off_for_tokenizers_it_would_not_run_the_same_way(tiny_model_dir: Path) -> None:
    import json

    from services.gateway.fast_bpe import FastBPE

    described = json.loads(ChatFormat.load(tiny_model_dir).tokenizer.backend_tokenizer.to_str())
    assert FastBPE.build(described) is not None

    def changed(edit) -> dict:  # type: ignore[no-untyped-def]
        copy = json.loads(json.dumps(described))
        edit(copy)
        return copy

    def swap_merges(d: dict) -> None:  # two merges out of their tokens' order
        d["model"]["merges"][5], d["model"]["merges"][6] = d["model"]["merges"][6], d["model"]["merges"][5]

    def unmade_token(d: dict) -> None:  # a longer token that no merge makes
        d["model"]["vocab"]["zzzqqq"] = max(d["model"]["vocab"].values()) + 1

    def split(d: dict) -> dict:
        return d["pre_tokenizer"]["pretokenizers"][0]  # type: ignore[no-any-return]

    refused = [
        changed(lambda d: d.update(normalizer={"type": "NFKC"})),
        changed(lambda d: d["model"].update(ignore_merges=True)),
        changed(lambda d: d["model"].update(byte_fallback=True)),
        changed(lambda d: d["model"].update(continuing_subword_prefix="##")),
        changed(lambda d: d["model"].update(type="Unigram")),
        changed(swap_merges),
        changed(unmade_token),
        changed(lambda d: split(d).update(behavior="MergedWithPrevious")),
        changed(lambda d: split(d)["pattern"].update(Regex=r"(?<=a)b|\s+")),  # a look-behind tiktoken lacks
        changed(lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True)),
        changed(lambda d: d["added_tokens"][0].update(lstrip=True)),
        changed(
            lambda d: d["added_tokens"].append({"id": 5000, "content": "<|im_end|>x"})
        ),  # one starts another
    ]
    assert [FastBPE.build(d) for d in refused] == [None] * len(refused)


def test_a_tokenizer_whose_probe_disagrees_with_tiktoken_keeps_its_own_ids(tiny_model_dir: Path) -> None:
    base = ChatFormat.load(tiny_model_dir)

    class Wrapped:  # a tokenizer that encodes "e" its own way (as transformers' Python-side steps may)
        backend_tokenizer = base.tokenizer.backend_tokenizer
        chat_template = base.tokenizer.chat_template

        def encode(self, text: str, add_special_tokens: bool) -> list[int]:
            return base.tokenizer.encode(text.replace("e", "E"), add_special_tokens=add_special_tokens)

        def __getattr__(self, name: str) -> object:
            return getattr(base.tokenizer, name)

    fmt = ChatFormat(
        tokenizer=Wrapped(),
        end_of_turn=base.end_of_turn,
        end_of_turn_id=base.end_of_turn_id,
        closing_ids=base.closing_ids,
        model_dir=base.model_dir,
        encoder=TokenizerEncoder(Wrapped()),
    )
    fmt._choose_encoder()
    assert isinstance(base.encoder, FastBPEEncoder)
    assert isinstance(fmt.encoder, TokenizerEncoder)  # the ids-only call disagrees with it too
    assert fmt.encode("hello there") == fmt.tokenizer.encode("hello there", add_special_tokens=False)


@pytest.mark.parametrize("model", ["tiny", "small"])
def test_the_plain_and_fast_encoders_give_the_same_ids_and_plain_can_be_forced(
    model: str, tiny_model_dir: Path, small_model_dir: Path
) -> None:
    """The tokenizer seam (``encoders.py``): for both shipped tokenizers ``load`` picks tiktoken, which gives the
    plain encoder's ids on the probe and on long texts; ``plain=True`` keeps the tokenizer's own ``encode`` for
    every text, with no halves, and renders the same ids."""
    model_dir = tiny_model_dir if model == "tiny" else small_model_dir
    fast, plain = ChatFormat.load(model_dir), ChatFormat.load(model_dir, plain=True)
    assert isinstance(fast.encoder, FastBPEEncoder) and fast.halves
    assert isinstance(plain.encoder, TokenizerEncoder) and not plain.halves
    for text in fast._probe_texts() + _long_texts():
        assert fast.encoder.encode(text) == plain.encoder.encode(text)
        assert (
            fast.encode(text) == plain.encode(text) == plain.tokenizer.encode(text, add_special_tokens=False)
        )
    conversation = Conversation(
        provider_api="openai_chat",
        messages=[Message(role="user", content="list files é 🙂"), _call("bash", {"command": "ls"})],
        tools=[BASH],
    )
    assert fast.render_prompt(conversation) == plain.render_prompt(conversation)


def test_the_halves_cut_just_before_a_letter_that_starts_a_line() -> None:
    text = "ab\ncd\n  ef\n\ngh\n1\nij\n"
    cut = _cut_in_half(text)
    assert text[cut - 2 : cut + 1] == "1\ni" and cut >= len(text) // 2  # not after "\n\n"
    assert _cut_in_half("x" * 100) == 0
    assert _cut_in_half("\n  a\n 1\n  b") == 0  # no newline directly before a letter
    assert _cut_in_half("a \nb" + "x" * 100) == 0  # nor one after a non-space
    early = "a\nb" + "x" * 100  # the only line start lies before the middle
    assert _cut_in_half(early) == 2


def test_halves_are_off_for_tokenizers_built_from_other_parts(tiny_model_dir: Path) -> None:
    import json

    from services.gateway.chat_format import _splits_safely

    described = json.loads(ChatFormat.load(tiny_model_dir).tokenizer.backend_tokenizer.to_str())
    assert _splits_safely(described)

    def changed(edit) -> dict:  # type: ignore[no-untyped-def]
        copy = json.loads(json.dumps(described))
        edit(copy)
        return copy

    def split(d: dict) -> dict:
        return d["pre_tokenizer"]["pretokenizers"][0]  # type: ignore[no-any-return]

    def byte_level(d: dict) -> dict:
        return d["pre_tokenizer"]["pretokenizers"][1]  # type: ignore[no-any-return]

    refused = [
        changed(lambda d: split(d)["pattern"].update(Regex=r"\s+|\S+")),  # a pattern not on the list
        changed(lambda d: split(d).update(behavior="MergedWithPrevious")),
        changed(lambda d: byte_level(d).update(add_prefix_space=True)),  # every piece would gain a space
        changed(lambda d: d.update(normalizer={"type": "NFKC"})),
        changed(lambda d: d["model"].update(type="Unigram")),
        changed(lambda d: d["added_tokens"].append({"content": "\nUser:", "lstrip": False, "rstrip": False})),
        changed(lambda d: d["added_tokens"][0].update(rstrip=True)),
    ]
    assert not any(_splits_safely(d) for d in refused)


# --- small work on the event loop (on_the_loop) ------------------------------------------------------------


def test_the_loop_tokenizes_up_to_its_budget_and_refuses_more_before_starting(
    chat_format: ChatFormat,
) -> None:
    from services.gateway.chat_format import TooLongForTheLoop, on_the_loop

    text = "def f(x):\n    return x + 1\n" * 4
    with on_the_loop(2 * len(text)):
        assert chat_format.encode(text) == chat_format.tokenizer.encode(text, add_special_tokens=False)
        assert chat_format.encode(text) == chat_format.tokenizer.encode(text, add_special_tokens=False)
        with pytest.raises(TooLongForTheLoop):  # the budget is for the whole block, not per text
            chat_format.encode("x")
    with pytest.raises(TooLongForTheLoop), on_the_loop(len(text) - 1):
        chat_format.encode(text)
    assert chat_format.encode(text * 100)  # outside a block there is no budget, also after a refusal


def test_the_loop_never_waits_for_a_turn_a_thread_is_encoding() -> None:
    import threading

    from services.gateway.chat_format import TooLongForTheLoop, TurnCache, on_the_loop

    cache, started, release = TurnCache(), threading.Event(), threading.Event()

    def slow_encode(turn: str) -> list[int]:
        started.set()
        release.wait(5)
        return [7]

    worker = threading.Thread(target=cache.ids, args=("turn", slow_encode))
    worker.start()
    started.wait(5)
    try:
        with pytest.raises(TooLongForTheLoop), on_the_loop(1000):
            cache.ids("turn", lambda turn: [7])
    finally:
        release.set()
        worker.join(5)
    with on_the_loop(1000):  # done now: a hit
        assert cache.ids("turn", lambda turn: [8]).tolist() == [7]
        assert cache.ids("other", lambda turn: [9]).tolist() == [9]  # encoded here, and kept
    assert cache.ids("other", lambda turn: [10]).tolist() == [9]


def test_a_turn_over_the_loop_budget_is_not_encoded_there(chat_format: ChatFormat) -> None:
    from services.gateway.chat_format import TooLongForTheLoop, TurnCache, on_the_loop

    cache, turn = TurnCache(), "a turn longer than ten characters"
    with pytest.raises(TooLongForTheLoop), on_the_loop(10):
        chat_format._encode_by_turn(turn, cache)
    assert (cache.misses, cache.hits) == (0, 0)
    assert cache.ids(turn, chat_format.encode).tolist() == chat_format.encode(turn)
    assert (cache.misses, cache.hits) == (1, 0)  # nothing was kept from the refused attempt
