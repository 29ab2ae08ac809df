"""The learner's in-memory training data: recorded ``Chain``s (``shared/trajectory.py``) → ``Rollout`` →
``TrainingBatch``.

A chain is what the gateway recorded as calls that extend each other; each call is a ``Segment`` holding only what
was new: the prompt suffix ids (tool results, user turns, template glue — and, after a turn cut by
``max_tokens``, the template's closing tokens) and the ids it sampled with their logprobs. The chain's full token
sequence is therefore the concatenation over its calls of ``suffix_ids + sampled_ids``; the loss mask is 1 exactly
on sampled ids. Every strategy in ``reconstruct.py`` trains the same *loss tokens* (the sampled ids), in the
canonical order defined by ``TrainingBatch``: chains in batch order, calls in chain order, sampled ids in order.
That shared order is what lets the strategies be compared token by token.

Who fills these: ``loader.py`` from ``calls`` rows and token segments (``Chain.from_rows``); tests and the
benchmark build them synthetically (``synthetic.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from shared.trajectory import Chain, IntArray


@dataclass(frozen=True, kw_only=True)
class Rollout:
    """One rollout's chains and its reward; ``advantage`` is set by ``grpo.group_advantages``."""

    rollout_id: str
    group_id: str
    reward: float
    chains: tuple[Chain, ...]
    advantage: float = 0.0
    calls_cut: int = 0
    """Its model calls that the token limit cut (``calls.finish_reason = 'length'``): what
    ``GRPOConfig.overlong_penalty`` charges."""


@dataclass
class TrainingBatch:
    """The rollouts of one learner step, with the canonical order of loss tokens (see the module docstring)."""

    rollouts: list[Rollout]
    chains: list[Chain] = field(init=False)

    def __post_init__(self) -> None:
        self.chains = [chain for rollout in self.rollouts for chain in rollout.chains]

    @cached_property
    def n_loss_tokens(self) -> int:
        return sum(chain.n_sampled for chain in self.chains)

    @cached_property
    def loss_token_offsets(self) -> IntArray:
        """Where each chain's loss tokens start in the canonical order (one extra entry: the total)."""
        return np.cumsum([0] + [chain.n_sampled for chain in self.chains]).astype(np.int64)

    def per_loss_token(self) -> dict[str, np.ndarray]:
        """Canonical per-loss-token arrays: advantage, behavior logprob, policy version, rollout and chain index."""
        advantage, behavior, version, rollout_index, chain_index = [], [], [], [], []
        chain_no = 0
        for r_no, rollout in enumerate(self.rollouts):
            for chain in rollout.chains:
                for call in chain.calls:
                    n = len(call.sampled_ids)
                    advantage.append(np.full(n, rollout.advantage, np.float64))
                    behavior.append(call.sampled_logprobs.astype(np.float64))
                    version.append(np.full(n, call.policy_version, np.int64))
                    rollout_index.append(np.full(n, r_no, np.int64))
                    chain_index.append(np.full(n, chain_no, np.int64))
                chain_no += 1

        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        return {
            "advantage": cat(advantage, np.float64),
            "behavior_logprobs": cat(behavior, np.float64),
            "policy_version": cat(version, np.int64),
            "rollout_index": cat(rollout_index, np.int64),
            "chain_index": cat(chain_index, np.int64),
        }
