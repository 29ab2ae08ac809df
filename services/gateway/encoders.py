"""The tokenizer seam: how ``ChatFormat`` turns a text into token ids (docs/design.md#tokenizing-a-chains-first-prompt).

``Encoder`` is the one method ``ChatFormat`` calls. Three implementations sit side by side, the plain one first:

- ``TokenizerEncoder``: the served tokenizer's own ``encode`` (transformers) — the reference every other one must
  match, and what ``ChatFormat.load(model_dir, plain=True)`` uses for every text;
- ``IdsOnlyEncoder``: the Rust tokenizer's ids-only batch call (no offsets or masks: ~25 % less time);
- ``FastBPEEncoder``: tiktoken over the tokenizer's own vocabulary (``fast_bpe.py``: about four times faster), which
  hands the texts it must leave to the tokenizer (not NFC, a byte the vocabulary lacks) to its ``fallback``.

``ChatFormat.load`` picks one in one place (``ChatFormat._choose_encoder``): a faster one only where it gives the
plain one's ids on a probe. Encoders are thread-safe (``ChatFormat`` encodes a long text's halves in two threads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from services.gateway.fast_bpe import FastBPE


class Encoder(Protocol):
    """A text (special and added tokens included, no BOS/EOS added) to the served tokenizer's ids."""

    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True)
class TokenizerEncoder:
    """The plain path: the tokenizer's own ``encode``."""

    tokenizer: Any

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


@dataclass(frozen=True)
class IdsOnlyEncoder:
    """The Rust tokenizer's ``encode_batch_fast`` (ids without offsets or masks)."""

    batch: Callable[..., list[Any]]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.batch([text], add_special_tokens=False)[0].ids
        return ids


@dataclass(frozen=True)
class FastBPEEncoder:
    """tiktoken over the tokenizer's vocabulary; a text it leaves to the tokenizer goes to ``fallback``."""

    fast: FastBPE
    fallback: Encoder

    def encode(self, text: str) -> list[int]:
        ids = self.fast.encode(text)
        return ids if ids is not None else self.fallback.encode(text)
