"""Reconstruction strategies: how a batch of chains becomes forward passes, and the loss tokens' logprobs.

Three strategies compute the same numbers (docs/design.md#reconstruction) and differ only in how much work they repeat:

- ``per_request``: every call is its own sequence, its whole prompt followed by what it sampled (the baseline:
  turn ``k`` recomputes turns ``1..k-1``).
- ``prefix_merging``: one sequence per chain; each call's sampled ids are trained where they sit in the chain.
- ``trie``: all chains of a pack go into one token trie (a token is a node keyed by its ancestors' ids), so a
  prefix shared by a group — system prompt, tool schemas, task text — and by the turns of one chain is computed
  once. The trie is cut into *segments* (runs of nodes without branching). Segments run depth first: a segment's
  queries attend to its ancestor segments' keys/values and causally to itself (``trie_attention.py``), with
  position ids = trie depths. Memory: only the segments on the current root-to-leaf path hold activations; a
  segment's keys/values are handed to its descendants as detached leaves whose gradients accumulate, then the
  segment runs its backward once with them. No mask over the pack is ever built. That is the CPU path
  (``trie_attention="blocks"``); on CUDA (``"flex"``) a pack is one sequence in depth-first order under a
  block-sparse FlexAttention mask (``trie_attention.FlexTrie``), padded to one of a few lengths per octave.

Every strategy produces the logprob of each loss token in the batch's canonical order (``types.py``) and, when
given a ``token_loss``, back-propagates ``token_loss(canonical_indices, logprobs)`` per forwarded unit. Because
the GRPO loss is a fixed weighted sum of per-token terms (``grpo.py``), summing those backward passes gives the
gradient of the whole batch, whichever strategy produced it. Work units (sequences or trie packs) are spread
over data-parallel ranks by token count; a rank computes only its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, cast, get_args

import numpy as np
import torch

from services.learner.trie_attention import FLEX_BLOCK, KV, FlexTrie, PackedTrie, TrieContext, pack_block_mask
from services.learner.types import TrainingBatch
from shared.run_config import GRPOConfig
from shared.trajectory import Chain, IntArray

STRATEGIES: tuple[str, ...] = get_args(GRPOConfig.model_fields["strategy"].annotation)
TRIE_ATTENTION: tuple[str, ...] = get_args(GRPOConfig.model_fields["trie_attention"].annotation)
"""How ``trie`` attends: per-segment forwards with fused blocks (CPU, one process), the same blocks inside one
forward per pack (CPU, sharded), one FlexAttention call per pack (CUDA), or by device and sharding."""

# token_loss(canonical_indices, logprobs) -> scalar loss of those tokens (already weighted for the batch).
TokenLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class Targets:
    """Loss tokens of one forwarded unit: which hidden state predicts which id, and where it goes canonically."""

    predict_at: IntArray
    target_ids: IntArray
    canonical: IntArray

    @staticmethod
    def empty() -> Targets:
        return Targets(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))

    @staticmethod
    def concat(parts: list[Targets]) -> Targets:
        if not parts:
            return Targets.empty()
        return Targets(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in Targets.__dataclass_fields__)
        )


@dataclass
class Sequence:
    """One causal sequence (``per_request``, ``prefix_merging``)."""

    ids: IntArray
    targets: Targets

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


@dataclass(kw_only=True)
class Segment:
    """A run of trie nodes without branching; ``start_depth`` is the position id of its first token."""

    ids: IntArray
    start_depth: int
    parent: int | None
    children: list[int] = field(default_factory=list)
    targets: Targets = field(default_factory=Targets.empty)


@dataclass
class TriePack:
    """One trie over some chains, its segments in depth-first order (a parent before its children)."""

    segments: list[Segment]

    @property
    def n_tokens(self) -> int:
        return sum(len(s.ids) for s in self.segments)


Unit = Sequence | TriePack


@dataclass(kw_only=True)
class StrategyOutput:
    """Loss-token logprobs in canonical order (detached; zeros where another rank computed them)."""

    logprobs: torch.Tensor
    computed: torch.Tensor  # bool per loss token: computed by this rank
    tokens_computed: int
    units: int
    plan_s: float


# --- planning ------------------------------------------------------------------------------------------------


def _chain_loss_positions(chain: Chain) -> IntArray:
    return np.flatnonzero(chain.loss_mask).astype(np.int64)


def plan_sequences(batch: TrainingBatch, strategy: str) -> list[Sequence]:
    """``per_request`` or ``prefix_merging`` sequences of a batch."""
    sequences: list[Sequence] = []
    for chain, offset in zip(batch.chains, batch.loss_token_offsets[:-1], strict=True):
        ids = chain.ids
        positions = _chain_loss_positions(chain)
        canonical = offset + np.arange(len(positions), dtype=np.int64)
        if strategy == "prefix_merging":
            sequences.append(Sequence(ids, Targets(positions - 1, ids[positions], canonical)))
            continue
        end = 0
        done = 0
        for call in chain.calls:
            end += len(call.suffix_ids) + len(call.sampled_ids)
            n = len(call.sampled_ids)
            if n == 0:
                continue
            mine = positions[done : done + n]
            sequences.append(Sequence(ids[:end], Targets(mine - 1, ids[mine], canonical[done : done + n])))
            done += n
    return sequences


class _TrieBuilder:
    """Insert chains into a token trie; ``new_tokens`` says what a chain would add before inserting it."""

    def __init__(self) -> None:
        self.child: dict[tuple[int, int], int] = {}
        self.parent: list[int] = []
        self.token: list[int] = []
        self.paths: list[tuple[Chain, int, IntArray]] = []

    def _walk(self, ids: IntArray) -> int:
        node = -1
        for depth, tok in enumerate(ids.tolist()):
            nxt = self.child.get((node, tok))
            if nxt is None:
                return depth
            node = nxt
        return len(ids)

    def new_tokens(self, chain: Chain) -> int:
        return len(chain.ids) - self._walk(chain.ids)

    def insert(self, chain: Chain, canonical_offset: int) -> None:
        path = np.empty(len(chain.ids), np.int64)
        node = -1
        for depth, tok in enumerate(chain.ids.tolist()):
            nxt = self.child.get((node, tok))
            if nxt is None:
                nxt = len(self.token)
                self.child[(node, tok)] = nxt
                self.parent.append(node)
                self.token.append(tok)
            path[depth] = nxt
            node = nxt
        self.paths.append((chain, canonical_offset, path))

    @property
    def n_nodes(self) -> int:
        return len(self.token)

    def build(self) -> TriePack:
        n = self.n_nodes
        kids: list[list[int]] = [[] for _ in range(n)]
        roots: list[int] = []
        for node, parent in enumerate(self.parent):
            (roots if parent < 0 else kids[parent]).append(node)
        seg_of = np.empty(n, np.int64)
        off_of = np.empty(n, np.int64)
        segments: list[Segment] = []
        tokens = np.asarray(self.token, np.int64)
        # Depth-first, so a segment's parent always precedes it; depth of a segment start = parent's end.
        stack: list[tuple[int, int | None, int]] = [(r, None, 0) for r in reversed(roots)]
        while stack:
            start, parent_seg, depth = stack.pop()
            nodes = [start]
            while len(kids[nodes[-1]]) == 1:
                nodes.append(kids[nodes[-1]][0])
            index = len(segments)
            seg_of[nodes] = index
            off_of[nodes] = np.arange(len(nodes))
            segments.append(Segment(ids=tokens[nodes], start_depth=depth, parent=parent_seg))
            if parent_seg is not None:
                segments[parent_seg].children.append(index)
            for kid in reversed(kids[nodes[-1]]):
                stack.append((kid, index, depth + len(nodes)))
        per_segment: list[list[Targets]] = [[] for _ in segments]
        for chain, offset, path in self.paths:
            positions = _chain_loss_positions(chain)
            predictors = path[positions - 1]
            targets = Targets(
                off_of[predictors], chain.ids[positions], offset + np.arange(len(positions), dtype=np.int64)
            )
            segs = seg_of[predictors]
            for s in np.unique(segs).tolist():
                pick = segs == s
                per_segment[s].append(
                    Targets(targets.predict_at[pick], targets.target_ids[pick], targets.canonical[pick])
                )
        for segment, parts in zip(segments, per_segment, strict=True):
            segment.targets = Targets.concat(parts)
        return TriePack(segments)


def plan_trie(batch: TrainingBatch, max_pack_tokens: int) -> list[TriePack]:
    """Greedy packs in batch order: a chain joins the current pack while the pack's trie stays in budget."""
    packs: list[TriePack] = []
    builder = _TrieBuilder()
    for chain, offset in zip(batch.chains, batch.loss_token_offsets[:-1].tolist(), strict=True):
        if builder.n_nodes and builder.n_nodes + builder.new_tokens(chain) > max_pack_tokens:
            packs.append(builder.build())
            builder = _TrieBuilder()
        builder.insert(chain, offset)
    if builder.n_nodes:
        packs.append(builder.build())
    return packs


def trie_lower_bound(batch: TrainingBatch) -> int:
    """Distinct (prefix) tokens of the batch: the fewest tokens any exact strategy must compute."""
    builder = _TrieBuilder()
    for chain in batch.chains:
        builder.insert(chain, 0)
    return builder.n_nodes


def pack_budget(batch: TrainingBatch, max_pack_tokens: int, world_size: int) -> int:
    """Trie pack budget for ``world_size`` ranks: at most a 1/N share of the batch's distinct tokens, so there are
    at least N packs to spread (one big pack would leave every other rank idle). A group that spills over a pack
    boundary recomputes its shared prefix in the next pack; with whole groups of similar size it does not."""
    if world_size <= 1:
        return max_pack_tokens
    return max(1, min(max_pack_tokens, -(-trie_lower_bound(batch) // world_size)))


def plan(batch: TrainingBatch, strategy: str, max_pack_tokens: int = 1 << 20) -> list[Unit]:
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown reconstruction strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    if strategy == "trie":
        return list(plan_trie(batch, max_pack_tokens))
    return list(plan_sequences(batch, strategy))


def assign_units(units: list[Unit], world_size: int) -> list[list[int]]:
    """Spread units over ranks, largest first onto the least-loaded rank (deterministic)."""
    load = [0] * world_size
    owned: list[list[int]] = [[] for _ in range(world_size)]
    for index in sorted(range(len(units)), key=lambda i: (-units[i].n_tokens, i)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        owned[rank].append(index)
        load[rank] += units[index].n_tokens
    return [sorted(o) for o in owned]


# --- execution -----------------------------------------------------------------------------------------------


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _logprobs(
    model: torch.nn.Module, ids: IntArray, positions: int | IntArray, targets: Targets, **kwargs: object
) -> torch.Tensor:
    """Logprobs of ``targets`` from one forward of ``ids`` at position ids ``positions, positions+1, ...`` (or the
    given array of them). The output head runs only where a loss token is predicted (``logits_to_keep``). The
    model is called as a whole — never its decoder and head separately — so a sharded model's hooks gather
    every parameter it uses."""
    device = _device(model)
    input_ids = torch.from_numpy(ids).to(device)[None]
    if isinstance(positions, np.ndarray):
        position_ids = torch.from_numpy(positions).to(device)[None]
    else:
        position_ids = torch.arange(positions, positions + len(ids), device=device)[None]
    at = torch.from_numpy(targets.predict_at).to(device)
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask={
            "full_attention": None
        },  # no mask: SDPA runs is_causal, the trie paths mask themselves
        use_cache=False,
        logits_to_keep=at,
        **kwargs,
    )
    logits = out.logits[0]
    if logits.dtype in (torch.bfloat16, torch.float16):
        logits = logits.float()
    target_ids = torch.from_numpy(targets.target_ids).to(device)
    return logits.gather(-1, target_ids[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)


class _Sink:
    """Collects logprobs of computed loss tokens into the canonical vector."""

    def __init__(self, n: int, device: torch.device) -> None:
        self.logprobs = torch.zeros(n, dtype=torch.float64, device=device)
        self.computed = torch.zeros(n, dtype=torch.bool, device=device)

    def put(self, targets: Targets, logprobs: torch.Tensor) -> torch.Tensor:
        index = torch.from_numpy(targets.canonical).to(logprobs.device)
        self.logprobs[index] = logprobs.detach().double()
        self.computed[index] = True
        return index


def _run_sequence(
    model: torch.nn.Module, seq: Sequence, sink: _Sink, token_loss: TokenLoss | None, amp
) -> None:  # type: ignore[no-untyped-def]
    with amp():
        logprobs = _logprobs(model, seq.ids, 0, seq.targets)
    index = sink.put(seq.targets, logprobs)
    if token_loss is not None:  # also without loss tokens: a sharded model's ranks run the same calls
        (token_loss(index, logprobs) if len(index) else logprobs.sum() * 0.0).backward()


def _run_pack(model: torch.nn.Module, pack: TriePack, sink: _Sink, token_loss: TokenLoss | None, amp) -> None:  # type: ignore[no-untyped-def]
    n_layers = int(cast(Any, model).config.num_hidden_layers)
    training = token_loss is not None

    def run(index: int, ancestors: list[list[KV]]) -> None:
        segment = pack.segments[index]
        context = TrieContext(ancestors=ancestors)
        with amp():
            logprobs = _logprobs(
                model, segment.ids, segment.start_depth, segment.targets, trie_context=context
            )
        own = [context.own[layer] for layer in range(n_layers)]
        # Descendants see this segment's K/V as leaves; their gradients collect there until our own backward.
        exposed = (
            [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in own] if training else own
        )
        for child in segment.children:
            run(child, [ancestors[layer] + [exposed[layer]] for layer in range(n_layers)])
        canonical = sink.put(segment.targets, logprobs)
        if not training:
            return
        outputs: list[torch.Tensor] = []
        grads: list[torch.Tensor | None] = []
        if len(canonical):
            outputs.append(token_loss(canonical, logprobs))  # type: ignore[misc]
            grads.append(None)
        for (k, v), (leaf_k, leaf_v) in zip(own, exposed, strict=True):
            for tensor, leaf in ((k, leaf_k), (v, leaf_v)):
                if leaf.grad is not None:
                    outputs.append(tensor)
                    grads.append(leaf.grad)
        if outputs:
            torch.autograd.backward(outputs, grads)  # type: ignore[arg-type]

    empty: list[list[KV]] = [[] for _ in range(n_layers)]
    for index, segment in enumerate(pack.segments):
        if segment.parent is None:
            run(index, empty)


def flex_length(n: int) -> int:
    """The padded length of an ``n``-token pack: a multiple of the sparse block, one of 8 sizes per octave, so a
    run compiles FlexAttention for a handful of lengths and wastes at most 1/8 on padding."""
    blocks = -(-n // FLEX_BLOCK)
    step = max(1, 1 << max(0, blocks.bit_length() - 4))
    return -(-blocks // step) * step * FLEX_BLOCK


@dataclass(kw_only=True)
class PackLayout:
    """A trie pack as one sequence: segments in pre-order, position ids = depths, then padding."""

    ids: IntArray
    positions: IntArray
    segment_of_token: IntArray
    subtree_end: IntArray
    targets: Targets

    @staticmethod
    def of(pack: TriePack, length: int) -> PackLayout:
        n_segments = len(pack.segments)
        subtree_end = np.arange(1, n_segments + 2, dtype=np.int64)  # the last entry is the padding's
        for index in range(n_segments - 1, -1, -1):  # children have larger pre-order indices than parents
            parent = pack.segments[index].parent
            if parent is not None:
                subtree_end[parent] = max(subtree_end[parent], subtree_end[index])
        lengths = [len(s.ids) for s in pack.segments]
        starts = np.cumsum([0] + lengths)
        pad = length - int(starts[-1])
        segment_of_token = np.repeat(np.arange(n_segments + 1), lengths + [pad])
        return PackLayout(
            ids=np.concatenate([s.ids for s in pack.segments] + [np.zeros(pad, np.int64)]),
            positions=np.concatenate(
                [np.arange(s.start_depth, s.start_depth + len(s.ids)) for s in pack.segments]
                + [np.zeros(pad, np.int64)]
            ),
            segment_of_token=segment_of_token,
            subtree_end=subtree_end,
            targets=Targets.concat(
                [
                    Targets(t.predict_at + start, t.target_ids, t.canonical)
                    for start, t in zip(starts[:-1].tolist(), (s.targets for s in pack.segments), strict=True)
                ]
            ),
        )


def _run_pack_flex(
    model: torch.nn.Module, pack: TriePack, sink: _Sink, token_loss: TokenLoss | None, amp
) -> None:  # type: ignore[no-untyped-def]
    device = next(model.parameters()).device
    layout = PackLayout.of(pack, flex_length(pack.n_tokens))
    mask = pack_block_mask(
        torch.from_numpy(layout.segment_of_token).to(device), torch.from_numpy(layout.subtree_end).to(device)
    )
    with amp():
        logprobs = _logprobs(model, layout.ids, layout.positions, layout.targets, trie_context=FlexTrie(mask))
    index = sink.put(layout.targets, logprobs)
    if token_loss is not None:  # also without loss tokens: a sharded model's ranks run the same calls
        (token_loss(index, logprobs) if len(index) else logprobs.sum() * 0.0).backward()


def _run_pack_packed(
    model: torch.nn.Module, pack: TriePack, sink: _Sink, token_loss: TokenLoss | None, amp
) -> None:  # type: ignore[no-untyped-def]
    """A pack as one forward and one backward (``trie_attention.PackedTrie``): the CPU trie path under FSDP2."""
    layout = PackLayout.of(pack, pack.n_tokens)
    starts = np.cumsum([0] + [len(s.ids) for s in pack.segments]).tolist()
    ancestors: list[list[int]] = []
    for segment in pack.segments:
        ancestors.append([] if segment.parent is None else [*ancestors[segment.parent], segment.parent])
    trie = PackedTrie(list(zip(starts[:-1], starts[1:], strict=True)), ancestors)
    with amp():
        logprobs = _logprobs(model, layout.ids, layout.positions, layout.targets, trie_context=trie)
    index = sink.put(layout.targets, logprobs)
    if token_loss is not None:
        # Backward also when this pack has no loss token: a sharded model's ranks must run the same calls.
        (token_loss(index, logprobs) if len(index) else logprobs.sum() * 0.0).backward()


def _run_idle(model: torch.nn.Module, training: bool, amp) -> None:  # type: ignore[no-untyped-def]
    """One token through the whole model with a zero loss: a rank with fewer units than another runs this so
    that every rank makes the same sequence of sharded-layer calls (all-gathers, reduce-scatters)."""
    one = Targets(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
    with amp():
        logprobs = _logprobs(model, np.zeros(1, np.int64), 0, one)
    if training:
        (logprobs.sum() * 0.0).backward()


def resolve_trie_attention(choice: str, device: torch.device, sharded: bool = False) -> str:
    if choice not in TRIE_ATTENTION:
        raise ValueError(f"unknown trie_attention {choice!r}; choose one of {', '.join(TRIE_ATTENTION)}")
    if choice == "auto":
        return "flex" if device.type == "cuda" else "packed" if sharded else "blocks"
    if choice == "blocks" and sharded:
        raise ValueError(
            "trie_attention='blocks' runs one forward per segment, a different number on each rank; a sharded "
            "(FSDP2) model needs 'packed' (CPU) or 'flex' (CUDA)"
        )
    return choice


def resolve_bf16(choice: bool | str, device: torch.device) -> bool:
    """Whether the learner computes in bfloat16 (``GRPOConfig.bf16_autocast``): ``choice`` itself, or for ``auto``
    whether ``device`` multiplies bf16 natively: a CUDA device with bf16 support, a CPU whose oneDNN has bf16
    kernels (AVX-512, AMX). An AVX2-only CPU emulates bf16: a SmolLM2-135M step measured ~18x slower than fp32
    (docs/perf/learning.md, attempt 27), so ``auto`` keeps it in fp32."""
    if isinstance(choice, bool):
        return choice
    if choice != "auto":
        raise ValueError(f"unknown bf16_autocast {choice!r}; choose true, false or auto")
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` is sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def compute(
    model: torch.nn.Module,
    batch: TrainingBatch,
    strategy: str,
    token_loss: TokenLoss | None = None,
    *,
    max_pack_tokens: int = 1 << 20,
    rank: int = 0,
    world_size: int = 1,
    bf16_autocast: bool = False,
    units: list[Unit] | None = None,
    trie_attention: str = "auto",
) -> StrategyOutput:
    """Forward (and, with ``token_loss``, backward) this rank's share of ``batch`` under ``strategy``.

    Requires ``trie_attention.install(model)`` for ``trie``. Without ``token_loss`` it runs under ``no_grad``.
    ``trie_attention`` picks the trie's attention path (``TRIE_ATTENTION``; ``auto``: flex on CUDA, else blocks,
    or packed when the model is sharded). A sharded model's ranks run in lockstep: one forward (and backward) per
    unit, and a rank with fewer units than the busiest one runs idle units (``_run_idle``) to match it.
    """
    started = time.perf_counter()
    if units is None:
        budget = pack_budget(batch, max_pack_tokens, world_size) if strategy == "trie" else max_pack_tokens
        units = plan(batch, strategy, budget)
    plan_s = time.perf_counter() - started
    device = _device(model)
    sharded = is_sharded(model)
    run_pack = {"flex": _run_pack_flex, "packed": _run_pack_packed, "blocks": _run_pack}[
        resolve_trie_attention(trie_attention, device, sharded)
    ]
    sink = _Sink(batch.n_loss_tokens, device)

    def amp():  # type: ignore[no-untyped-def]
        return torch.autocast(device.type, dtype=torch.bfloat16) if bf16_autocast else nullcontext()

    tokens = 0
    count = 0
    owned = assign_units(units, world_size)
    with torch.no_grad() if token_loss is None else nullcontext():
        for index in owned[rank]:
            unit = units[index]
            if isinstance(unit, TriePack):
                run_pack(model, unit, sink, token_loss, amp)
            else:
                _run_sequence(model, unit, sink, token_loss, amp)
            tokens += unit.n_tokens
            count += 1
        if sharded:
            for _ in range(max(len(o) for o in owned) - len(owned[rank])):
                _run_idle(model, token_loss is not None, amp)
    return StrategyOutput(
        logprobs=sink.logprobs, computed=sink.computed, tokens_computed=tokens, units=count, plan_s=plan_s
    )
