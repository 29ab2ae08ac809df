"""A faster encoder for byte-level BPE tokenizers: tiktoken's, built from the served tokenizer's own vocabulary.

Tokenizing is nearly all of the plan of a call that brings a long new text (a chain's first prompt, a fresh user
turn, a big tool output), and ~90 % of the Rust tokenizer's time there is its pre-tokenizer regex. tiktoken runs
the same split pattern and the same byte-level BPE about four times faster (0.24 against 0.98 ms for 1.5k tokens of
code on one core), so ``FastBPE`` gives ``ChatFormat`` the tokenizer's ids from tiktoken where the two are the same
algorithm on the same data:

- **the split**: the tokenizer's pattern is GPT-2's (``ByteLevel`` with its regex) or Qwen 2's or Llama 3's
  ``Split`` regex isolated before a plain ``ByteLevel``, with no prefix space: patterns that tiktoken's regex
  engine reads the same way;
- **the merges**: HF's BPE merges the adjacent pair that comes first in the merge list; tiktoken merges the adjacent
  pair whose concatenation has the lowest rank. Each token here is made by exactly one merge and its id grows with
  the merge's place in the list, so the id *is* the rank (no table between them) and both pick the same pair. Where a
  pair's concatenation is a token made by another merge, a vocabulary learned by BPE (or converted from tiktoken's
  ranks) never reaches that pair before its own merge: the merges ran on such pieces in this order when it was
  learned. tiktoken also takes a piece that is one whole token as that token, which the merges reach too;
- **the rest**: the normalizer is none or NFC (a text that is not already NFC goes to the tokenizer), no added token
  strips whitespace or starts another (tiktoken finds them by a regex alternation, HF by the longest match), a text
  with a byte the vocabulary lacks or a lone surrogate goes to the tokenizer (which drops or refuses it).

``FastBPE.build`` returns None for any other tokenizer; ``ChatFormat.load`` also compares it with the tokenizer on a
probe and keeps the tokenizer where they differ. ``tests/unit/test_chat_format.py`` compares them on code, prose,
random unicode and special tokens for both shipped tokenizers.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
"""The split pattern of ``ByteLevel(use_regex=True)`` (tokenizers' ``byte_level.rs``)."""
QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
"""Qwen 2's and Qwen 3's ``Split`` pattern (the tiny model's too)."""
LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
"""Llama 3's ``Split`` pattern."""
KNOWN_SPLITS = frozenset({QWEN2_SPLIT, LLAMA3_SPLIT})
"""``Split`` patterns whose meaning in tiktoken's regex engine (fancy-regex) is the same as in the tokenizer's
(Oniguruma): other engines' look-arounds, classes and quantifiers can differ, so no other pattern is taken."""


def byte_level_alphabet() -> dict[str, int]:
    """The printable character ``ByteLevel`` writes for each byte (GPT-2's ``bytes_to_unicode``), inverted."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in kept}
    shifted = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return {c: b for b, c in chars.items()}


def pre_tokenizer_steps(described: dict[str, Any]) -> list[dict[str, Any]]:
    """The pre-tokenizer's steps in order (one for a tokenizer without a ``Sequence``)."""
    pre = described.get("pre_tokenizer") or {}
    steps: list[dict[str, Any]] = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    return steps


def byte_level(step: dict[str, Any], use_regex: bool) -> bool:
    """Whether a pre-tokenizer step is ``ByteLevel`` without a prefix space, splitting by GPT-2's pattern or not."""
    return (
        step.get("type") == "ByteLevel"
        and not step.get("add_prefix_space")
        and bool(step.get("use_regex", True)) == use_regex
    )


def _split_pattern(described: dict[str, Any]) -> str | None:
    """The pre-tokenizer's split regex where it is one tiktoken runs the same way; None otherwise."""
    steps = pre_tokenizer_steps(described)
    if len(steps) == 1 and byte_level(steps[0], use_regex=True):
        return GPT2_SPLIT
    if len(steps) == 2 and byte_level(steps[1], use_regex=False):
        split = steps[0]
        pattern = (split.get("pattern") or {}).get("Regex")
        if (
            split.get("type") == "Split"
            and pattern in KNOWN_SPLITS
            and split.get("behavior") == "Isolated"
            and not split.get("invert")
        ):
            return pattern
    return None


def _ranks(model: dict[str, Any], added: set[str]) -> dict[bytes, int] | None:
    """Each token's bytes to its id, where the ids can serve as tiktoken's ranks (the module docstring); the added
    tokens are left out (they are found before BPE runs)."""
    if model.get("type") != "BPE" or model.get("dropout") or model.get("byte_fallback"):
        return None
    if (
        model.get("ignore_merges")
        or model.get("continuing_subword_prefix")
        or model.get("end_of_word_suffix")
    ):
        return None
    vocab: dict[str, int] = model.get("vocab") or {}
    merges: list[Any] = model.get("merges") or []
    alphabet = byte_level_alphabet()
    try:
        ranks = {bytes(alphabet[c] for c in token): i for token, i in vocab.items() if token not in added}
    except KeyError:  # a token outside the byte-level alphabet
        return None
    if len(set(ranks.values())) != len(ranks):
        return None
    last = -1
    for merge in merges:
        left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
        made = vocab.get(left + right)
        if made is None or made <= last:  # a merge that makes no token, or ids out of the merges' order
            return None
        last = made
    if sum(1 for token in ranks if len(token) > 1) != len(merges):  # a longer token no merge makes
        return None
    return ranks


@dataclass(frozen=True, kw_only=True)
class FastBPE:
    """tiktoken's encoder over the tokenizer's vocabulary; ``encode`` returns None for a text it leaves to the
    tokenizer."""

    encoding: Any
    nfc: bool
    """Whether the tokenizer normalizes to NFC (a text that is not already NFC is left to it)."""
    missing_ascii: re.Pattern[str] | None
    """ASCII characters the vocabulary lacks (the tokenizer drops them); a text with one is left to it."""
    unsupported: re.Pattern[str]
    """What leaves a non-ASCII text to the tokenizer (``_unsupported``)."""

    @classmethod
    def build(cls, described: dict[str, Any]) -> FastBPE | None:
        """From a tokenizer's ``tokenizer.json``; None where it is not built from the parts the module names, or
        tiktoken is not installed."""
        try:
            import tiktoken
        except ImportError:
            return None
        normalizer = described.get("normalizer")
        if normalizer is not None and normalizer.get("type") != "NFC":
            return None
        pattern = _split_pattern(described)
        added: dict[str, int] = {}
        for token in described.get("added_tokens") or []:
            content = token.get("content", "")
            if not content or token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
                return None
            added[content] = token["id"]
        if any(a != b and b.startswith(a) for a in added for b in added):
            return None
        ranks = _ranks(described.get("model") or {}, set(added))
        if pattern is None or ranks is None:
            return None
        try:
            encoding = tiktoken.Encoding(
                "harnessrl-served", pat_str=pattern, mergeable_ranks=ranks, special_tokens=added
            )
        except Exception:  # a pattern tiktoken's regex engine does not take
            return None
        missing = [b for b in range(256) if bytes([b]) not in ranks]
        return cls(
            encoding=encoding,
            nfc=normalizer is not None,
            missing_ascii=_missing_ascii(missing),
            unsupported=_unsupported(missing),
        )

    def encode(self, text: str) -> list[int] | None:
        """The tokenizer's ids for ``text`` (special and added tokens included), or None to leave it to the
        tokenizer."""
        if text.isascii():
            if self.missing_ascii is not None and self.missing_ascii.search(text):
                return None
        elif (self.nfc and not unicodedata.is_normalized("NFC", text)) or self.unsupported.search(text):
            return None
        ids: list[int] = self.encoding.encode(text, allowed_special="all")
        return ids


def _missing_ascii(missing: list[int]) -> re.Pattern[str] | None:
    """A pattern for the ASCII characters the vocabulary lacks (None where it has them all)."""
    chars = [re.escape(chr(b)) for b in missing if b < 0x80]
    return re.compile("[" + "".join(chars) + "]") if chars else None


def _unsupported(missing: list[int]) -> re.Pattern[str]:
    """A pattern for what leaves a non-ASCII text to the tokenizer: a lone surrogate, or a character whose UTF-8
    holds a byte the vocabulary lacks (SmolLM2's lacks six control characters and the lead bytes F1 and F2)."""
    parts = [r"\ud800-\udfff"]
    parts += [re.escape(chr(b)) for b in missing if b < 0x80]
    for lead in missing:  # a lead byte stands for one range of code points; C0, C1 and F5-FF never occur
        if 0xC2 <= lead <= 0xDF:
            first, size, floor = (lead & 0x1F) << 6, 1 << 6, 0x80
        elif 0xE0 <= lead <= 0xEF:
            first, size, floor = (lead & 0x0F) << 12, 1 << 12, 0x800
        elif 0xF0 <= lead <= 0xF4:
            first, size, floor = (lead & 0x07) << 18, 1 << 18, 0x10000
        else:
            continue
        low, high = max(first, floor), min(first + size - 1, 0x10FFFF)
        parts.append(f"\\U{low:08x}-\\U{high:08x}")
    if any(
        0x80 <= b <= 0xBF for b in missing
    ):  # a continuation byte: too many ranges, any non-ASCII character
        parts.append(r"\x80-\U0010ffff")
    return re.compile("[" + "".join(parts) + "]")
