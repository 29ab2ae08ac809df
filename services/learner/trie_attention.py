"""Attention for trie training: a segment's queries attend to its ancestors' keys/values and causally to its own.

A trie segment (a run of tokens without branching) sees every token of its ancestor segments (they all precede
it on its one root-to-leaf path) and the earlier tokens of itself. Rather than concatenating the ancestors' K/V
(one copy per descendant, kept for backward) or building a 4-D mask over the whole pack (quadratic memory), each
block is one call of the fused CPU flash-attention kernel — ancestors unmasked, the segment itself with
``is_causal`` (so the kernel skips the upper triangle) — and the partial results are merged exactly by their
log-sum-exps. The backward runs the kernel's backward once per block with the *merged* output and log-sum-exp:
``softmax`` over the union of keys restricted to one block is ``exp(s - lse_total)``, so each block's gradient
is exact, and the query gradient is the sum over blocks (the ring-attention identity). Nothing of size
``queries x keys`` is ever stored.

``install(model)`` registers this as the model's attention implementation. Without a ``trie_context`` keyword
the same function falls through to transformers' SDPA, so one model object serves every strategy.

**The GPU path** (``FlexTrie``): on CUDA the whole pack is one sequence in depth-first order and one
FlexAttention call per layer with a block-sparse mask — token ``q`` sees token ``kv`` iff ``kv <= q`` and ``kv``'s
segment is an ancestor of (or is) ``q``'s segment. Segments are numbered in pre-order, so that is
``segment[q] < subtree_end[segment[kv]]``: one gather and two compares per score, and the kernel skips every
128x128 block with nothing visible (a sibling's subtree). One big kernel per layer instead of a kernel per
(segment, ancestor) pair keeps a GPU busy; FlexAttention stores no score matrix and has a fused backward.
FlexAttention has no CPU backward, so on CPU the per-segment path above trains and the packed path runs only
without gradients (unfused, for checking it against the other strategies).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

ATTENTION_NAME = "harnessrl_trie"

KV = tuple[torch.Tensor, torch.Tensor]


@dataclass
class TrieContext:
    """Per forward of one segment: ancestors' K/V per layer in, this segment's K/V per layer out."""

    ancestors: list[list[KV]]  # [layer][ancestor segment] -> (key, value), each [1, kv_heads, len, head_dim]
    own: dict[int, KV] = field(default_factory=dict)


@dataclass
class PackedTrie:
    """A whole trie pack forwarded as one sequence on CPU: each segment's token range and its ancestors.

    The attention is the per-segment block computation of ``MergedBlockAttention`` done inside one layer call
    (``PackedBlockAttention``), so a pack is one forward and one backward of the model — what sharded training
    needs (every rank must run the same sequence of layer calls) — instead of one forward per segment."""

    ranges: list[tuple[int, int]]
    """Segment -> its ``[start, end)`` in the pack (pre-order, contiguous)."""
    ancestors: list[list[int]]
    """Segment -> its ancestor segments, root first."""


@dataclass
class FlexTrie:
    """A whole trie pack forwarded as one sequence: the block-sparse ancestor mask for every layer."""

    block_mask: BlockMask


FLEX_BLOCK = 128  # FlexAttention's sparse block size; packs are padded to a multiple of it


def pack_block_mask(segment_of_token: torch.Tensor, subtree_end: torch.Tensor) -> BlockMask:
    """The ancestor mask of a packed trie. ``segment_of_token[i]`` is token ``i``'s segment (pre-order index),
    ``subtree_end[s]`` one past the last segment of ``s``'s subtree. Padding tokens get a segment of their own
    past every real one, so they see only padding and nothing real sees them."""
    kv_end = subtree_end[segment_of_token]
    n = int(segment_of_token.shape[0])

    def ancestor_or_self(b, h, q, kv):  # type: ignore[no-untyped-def]
        return (kv <= q) & (segment_of_token[q] < kv_end[kv])

    device = segment_of_token.device
    if device.type == "cuda":
        _allow_pack_lengths()
    return create_block_mask(
        ancestor_or_self,
        None,
        None,
        n,
        n,
        device=device,
        BLOCK_SIZE=FLEX_BLOCK,
        _compile=device.type == "cuda",
    )


_compiled_flex: Any = None
PACK_LENGTHS_COMPILED = 64


def _allow_pack_lengths() -> None:
    """Packs come in a few padded lengths per octave (``reconstruct.flex_length``); each compiles once. Dynamo's
    default of 8 recompiles per function would fall back to the unfused kernel (quadratic memory) after that."""
    import torch._dynamo as dynamo

    dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, PACK_LENGTHS_COMPILED)


def _flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: BlockMask, scale: float
) -> torch.Tensor:
    global _compiled_flex
    if q.device.type == "cpu":
        if torch.is_grad_enabled():
            raise RuntimeError(
                "FlexAttention has no CPU backward: train on CPU with trie_attention='blocks' (the default there)"
            )
        # Unfused reference (materializes one layer's scores): for checking the packed path on small batches.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            return flex_attention(q, k, v, block_mask=mask, scale=scale, enable_gqa=True)  # type: ignore[return-value]
    if _compiled_flex is None:
        _allow_pack_lengths()
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex(q, k, v, block_mask=mask, scale=scale, enable_gqa=True)  # type: ignore[no-any-return]


def _flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float):  # type: ignore[no-untyped-def]
    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    # Reference path for other devices: exact but materializes the score block (small blocks only).
    scores = torch.matmul(q, _expand_kv(k, q).transpose(-1, -2)) * scale
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), _expand_kv(v, q))
    return out, lse


def _expand_kv(kv: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return kv.repeat_interleave(q.shape[1] // kv.shape[1], dim=1)


def _merge(outs: list[torch.Tensor], lses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax attention over the union of key blocks from each block's output and log-sum-exp."""
    lse_total = torch.logsumexp(torch.stack(lses), dim=0)
    merged = sum(torch.exp(lse - lse_total).unsqueeze(-1) * out for out, lse in zip(outs, lses, strict=True))
    return merged, lse_total  # type: ignore[return-value]


def _block_forward(q: torch.Tensor, blocks: list[tuple[torch.Tensor, torch.Tensor, bool]], scale: float):  # type: ignore[no-untyped-def]
    accumulate = torch.float64 if q.dtype == torch.float64 else torch.float32
    outs, lses = [], []
    for k, v, is_causal in blocks:
        out, lse = _flash_forward(q, k, v, is_causal, scale)
        outs.append(out.to(accumulate))
        lses.append(lse.to(accumulate))
    merged, lse_total = _merge(outs, lses)
    return merged.to(q.dtype), lse_total


def _block_backward(grad_out, q, k, v, merged, lse_total, is_causal: bool, scale: float):  # type: ignore[no-untyped-def]
    """Gradients of one key block given the *merged* output and log-sum-exp (exact; see the module doc)."""
    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad_out, q, k, v, merged, lse_total, 0.0, is_causal, scale=scale
        )
    return _reference_block_backward(grad_out, q, k, v, merged, lse_total, is_causal, scale)


class PackedBlockAttention(torch.autograd.Function):
    """``MergedBlockAttention`` for every segment of a packed trie in one autograd node: the segments' queries
    are slices of ``q``, their ancestors' keys/values slices of ``k``/``v`` (views, never copies); the backward
    accumulates each block's gradients into the slices it came from."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, trie: PackedTrie):  # type: ignore[no-untyped-def, override]
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:-1], dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
        for segment, (a, b) in enumerate(trie.ranges):
            spans = [trie.ranges[p] for p in trie.ancestors[segment]] + [(a, b)]
            blocks = [(k[:, :, c:d], v[:, :, c:d], i == len(spans) - 1) for i, (c, d) in enumerate(spans)]
            out[:, :, a:b], lse[:, :, a:b] = _block_forward(q[:, :, a:b], blocks, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        ctx.trie = trie
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[no-untyped-def, override]
        q, k, v, out, lse = ctx.saved_tensors
        trie: PackedTrie = ctx.trie
        grad_out = grad_out.to(q.dtype).contiguous()
        grad_q, grad_k, grad_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for segment, (a, b) in enumerate(trie.ranges):
            spans = [trie.ranges[p] for p in trie.ancestors[segment]] + [(a, b)]
            for i, (c, d) in enumerate(spans):
                gq, gk, gv = _block_backward(
                    grad_out[:, :, a:b],
                    q[:, :, a:b],
                    k[:, :, c:d],
                    v[:, :, c:d],
                    out[:, :, a:b],
                    lse[:, :, a:b],
                    i == len(spans) - 1,
                    ctx.scale,
                )
                grad_q[:, :, a:b] += gq
                grad_k[:, :, c:d] += gk
                grad_v[:, :, c:d] += gv
        return grad_q, grad_k, grad_v, None, None


class MergedBlockAttention(torch.autograd.Function):
    """softmax(q K^T) V over the concatenation of key/value blocks, computed block by block (see module doc)."""

    @staticmethod
    def forward(
        ctx, q: torch.Tensor, scale: float, causal: tuple[bool, ...], *kv: torch.Tensor
    ) -> torch.Tensor:  # type: ignore[override]
        blocks = [(kv[2 * i], kv[2 * i + 1], is_causal) for i, is_causal in enumerate(causal)]
        merged, lse_total = _block_forward(q, blocks, scale)
        ctx.save_for_backward(q, merged, lse_total, *kv)
        ctx.scale = scale
        ctx.causal = causal
        return merged

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[no-untyped-def, override]
        q, merged, lse_total, *kv = ctx.saved_tensors
        grad_out = grad_out.to(q.dtype).contiguous()
        grad_q = torch.zeros_like(q)
        grad_kv: list[torch.Tensor] = []
        for i, is_causal in enumerate(ctx.causal):
            k, v = kv[2 * i], kv[2 * i + 1]
            gq, gk, gv = _block_backward(grad_out, q, k, v, merged, lse_total, is_causal, ctx.scale)
            grad_q += gq
            grad_kv += [gk, gv]
        return (grad_q, None, None, *grad_kv)


def _reference_block_backward(grad_out, q, k, v, merged, lse_total, causal, scale):  # type: ignore[no-untyped-def]
    ke, ve = _expand_kv(k, q), _expand_kv(v, q)
    scores = torch.matmul(q, ke.transpose(-1, -2)).float() * scale
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    probs = torch.exp(scores - lse_total.unsqueeze(-1))
    grad_v = torch.matmul(probs.transpose(-1, -2).to(q.dtype), grad_out)
    grad_p = torch.matmul(grad_out, ve.transpose(-1, -2)).float()
    delta = (grad_out.float() * merged.float()).sum(-1, keepdim=True)
    grad_s = (probs * (grad_p - delta) * scale).to(q.dtype)
    grad_q = torch.matmul(grad_s, ke)
    grad_k = torch.matmul(grad_s.transpose(-1, -2), q)
    groups = q.shape[1] // k.shape[1]
    fold = (k.shape[0], k.shape[1], groups, *k.shape[2:])
    return grad_q, grad_k.reshape(fold).sum(2), grad_v.reshape(fold).sum(2)


def trie_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    context: TrieContext | PackedTrie | FlexTrie | None = kwargs.pop("trie_context", None)
    if context is None:
        out, weights = sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
        return out, weights
    layer = int(module.layer_idx)  # type: ignore[arg-type]
    # Under autocast the projections are bf16 but RoPE promotes q/k to fp32; run the kernel in one dtype.
    device = query.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else query.dtype
    query, key, value = query.to(dtype), key.to(dtype), value.to(dtype)
    scale = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
    if isinstance(context, FlexTrie):
        out = _flex_attention(query, key, value, context.block_mask, scale)
        return out.transpose(1, 2).contiguous(), None
    if isinstance(context, PackedTrie):
        out = PackedBlockAttention.apply(
            query.contiguous(), key.contiguous(), value.contiguous(), scale, context
        )
        return out.transpose(1, 2).contiguous(), None
    context.own[layer] = (key, value)
    blocks = [*context.ancestors[layer], (key, value)]
    causal = tuple([False] * (len(blocks) - 1) + [True])
    flat = [t for kv in blocks for t in kv]
    out = MergedBlockAttention.apply(query.contiguous(), scale, causal, *flat)
    return out.transpose(1, 2).contiguous(), None  # transformers expects [batch, queries, heads, head_dim]


def install(model: torch.nn.Module) -> None:
    """Make ``model`` use the trie-aware attention (SDPA whenever no ``trie_context`` is passed)."""
    AttentionInterface.register(ATTENTION_NAME, trie_attention_forward)
    model.set_attn_implementation(ATTENTION_NAME)  # type: ignore[operator]
