"""The learner's in-memory training data: ``TrainingCall`` → ``Chain`` → ``TrainingBatch``.

A chain is what the gateway recorded as calls that extend each other. Call ``k`` of a chain stored only what was
new: the prompt suffix ids (tool results, user turns, template glue — and, after a turn cut by ``max_tokens``,
the template's closing tokens) and the ids it sampled with their logprobs. The chain's full token sequence is
therefore the concatenation over its calls of ``suffix_ids + sampled_ids``; the loss mask is 1 exactly on
sampled ids. Call ``k``'s prompt is everything before its sampled ids. Every strategy in ``reconstruct.py``
trains the same *loss tokens* (the sampled ids), in the canonical order defined by ``TrainingBatch``: chains in
batch order, calls in chain order, sampled ids in order. That shared order is what lets the strategies be
compared token by token.

Who fills these: ``loader.py`` from ``calls`` rows and ``tokens/…`` objects; tests and the benchmark build them
synthetically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


class InconsistentTrajectory(ValueError):
    """Token arrays that cannot be trained as recorded (lengths, masks, versions); the message says which."""


@dataclass(frozen=True)
class TrainingCall:
    """One model call of a chain: the new prompt suffix and what the policy sampled after it."""

    suffix_ids: IntArray
    sampled_ids: IntArray
    sampled_logprobs: FloatArray
    policy_version: int
    finish_reason: str = "stop"

    def check(self) -> None:
        if self.suffix_ids.ndim != 1 or self.sampled_ids.ndim != 1 or self.sampled_logprobs.ndim != 1:
            raise InconsistentTrajectory("token arrays must be one-dimensional")
        if len(self.sampled_ids) != len(self.sampled_logprobs):
            raise InconsistentTrajectory(
                f"{len(self.sampled_ids)} sampled ids but {len(self.sampled_logprobs)} sampled logprobs"
            )
        if not np.all(np.isfinite(self.sampled_logprobs)) or np.any(self.sampled_logprobs > 1e-4):
            raise InconsistentTrajectory("sampled logprobs must be finite and <= 0")
        if self.policy_version < 0:
            raise InconsistentTrajectory(f"negative policy version {self.policy_version}")


@dataclass(frozen=True)
class Chain:
    """Calls that extend each other: one trajectory segment trained as one sequence by ``prefix_merging``."""

    chain_id: str
    rollout_id: str
    group_id: str
    calls: tuple[TrainingCall, ...]

    def _per_token(self, on_suffix, on_sampled, dtype: type) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Concatenate, call by call, ``on_suffix(call)`` for its suffix and ``on_sampled(call)`` for its sample."""
        parts: list[np.ndarray] = [
            np.asarray(f(c), dtype) for c in self.calls for f in (on_suffix, on_sampled)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    @cached_property
    def ids(self) -> IntArray:
        return self._per_token(lambda c: c.suffix_ids, lambda c: c.sampled_ids, np.int64)

    @cached_property
    def loss_mask(self) -> npt.NDArray[np.bool_]:
        return self._per_token(
            lambda c: np.zeros(len(c.suffix_ids)), lambda c: np.ones(len(c.sampled_ids)), np.bool_
        )

    @cached_property
    def behavior_logprobs(self) -> FloatArray:
        """Per token; 0.0 where the loss mask is 0 (never read there)."""
        return self._per_token(
            lambda c: np.zeros(len(c.suffix_ids)), lambda c: c.sampled_logprobs, np.float32
        )

    @cached_property
    def policy_versions(self) -> IntArray:
        """Per token: the version that sampled it (suffix tokens carry their call's version)."""
        return self._per_token(
            lambda c: np.full(len(c.suffix_ids), c.policy_version),
            lambda c: np.full(len(c.sampled_ids), c.policy_version),
            np.int64,
        )

    @property
    def n_sampled(self) -> int:
        return sum(len(c.sampled_ids) for c in self.calls)

    def check(self, vocab_size: int | None = None) -> None:
        if not self.calls:
            raise InconsistentTrajectory(f"chain {self.chain_id} has no calls")
        for call in self.calls:
            call.check()
        if len(self.calls[0].suffix_ids) == 0:
            raise InconsistentTrajectory(f"chain {self.chain_id} starts without a prompt")
        if vocab_size is not None and len(self.ids) and (self.ids.min() < 0 or self.ids.max() >= vocab_size):
            raise InconsistentTrajectory(f"chain {self.chain_id} has token ids outside the vocabulary")


@dataclass(frozen=True)
class Rollout:
    """One rollout's chains and its reward; ``advantage`` is set by ``grpo.group_advantages``."""

    rollout_id: str
    group_id: str
    reward: float
    chains: tuple[Chain, ...]
    advantage: float = 0.0


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
