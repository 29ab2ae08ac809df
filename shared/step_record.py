"""``StepRecord``: what one learner step writes to its ``steps`` row and what every reader reads back.

The learner (``services/learner``) builds one per step and writes it with ``columns()`` (the row's typed columns)
and ``metrics_json()`` (the row's ``metrics`` JSON); the api serves the row as it is stored
(``GET /v1/runs/{id}``, ``step_metrics``); the CLI reads it back with ``StepRecord.from_row`` (an ORM row or the
api's dict). No other code reads or writes a key of ``steps.metrics`` (``tests/unit/test_step_record_layer.py``).

Versions of the ``metrics`` JSON (its ``record_version`` key):

- 1 (no ``record_version``): rows written before this module. Same keys as version 2; a key a row lacks (rows
  older than the key) reads as the field's default, and a row without ``window_end_unix`` has no ``window``.
- 2: written by ``metrics_json``.

Key names are kept from version 1 so the SQL views and ``harnessrl sql`` queries keep working; where a JSON key
and a column share a name but not a meaning, the field says which it is (``update_s`` is the JSON
``step_time_s``; ``step_time_s`` is the column).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

RECORD_VERSION = 2


class StepRecordError(ValueError):
    """A ``steps`` row whose metrics this version cannot read."""


@dataclass(frozen=True, kw_only=True)
class SetAside:
    """A group the learner set aside (missing or inconsistent token arrays), and why."""

    group_id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class StepWindow:
    """The step's window: wall time from the previous step's commit (step 1: the run's first groups) to this
    step's commit, and how busy inference and the learner were in it (``services/learner/timing.py``)."""

    window_start_unix: float
    window_end_unix: float
    wall_s: float
    learner_busy_s: float
    learner_busy_fraction: float
    inference_busy_s: float = 0.0
    inference_busy_fraction: float = 0.0


@dataclass(frozen=True, kw_only=True)
class UpdateFigures:
    """What the GRPO update computed (``grpo.grpo_step``), or zeros and the rewards for a step without update."""

    loss: float = 0.0
    clip_fraction: float = 0.0
    kl_behavior: float = 0.0
    kl_reference: float = 0.0
    """KL to the reference model (JSON ``kl`` and ``kl_reference``); 0 without one."""
    tis_fraction: float | None = None
    grad_norm: float | None = None
    reward_mean: float = 0.0
    reward_std: float = 0.0
    loss_tokens: float = 0.0
    tokens_computed: float = 0.0
    tokens_lower_bound: float | None = None
    """The batch's distinct prefix tokens (its token trie's nodes): the fewest any exact strategy computes; beside
    ``tokens_computed`` it says how much the strategy recomputed (a multi-call chain's or a group's shared
    prefix). None on rows written before it was recorded."""
    plan_s: float | None = None
    update_s: float = 0.0
    """Seconds of the update itself (JSON ``step_time_s``)."""
    peak_memory_bytes: int | None = None
    peak_memory_step_bytes: int | None = None
    no_update: bool = False

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float]) -> UpdateFigures:
        """From a step's metrics: ``grpo.StepResult.metrics``, or the SFT step's (``sft.sft_step``), which has no
        clipping, importance ratios or KL, so those keep their defaults."""
        return cls(
            loss=metrics["loss"],
            clip_fraction=metrics.get("clip_fraction", 0.0),
            kl_behavior=metrics.get("kl_behavior", 0.0),
            kl_reference=metrics.get("kl", 0.0),
            tis_fraction=metrics.get("tis_fraction"),
            grad_norm=metrics["grad_norm"],
            reward_mean=metrics["reward_mean"],
            reward_std=metrics["reward_std"],
            loss_tokens=metrics["loss_tokens"],
            tokens_computed=metrics["tokens_computed"],
            tokens_lower_bound=metrics.get("tokens_lower_bound"),
            plan_s=metrics["plan_s"],
            update_s=metrics["step_time_s"],
            peak_memory_bytes=int(metrics["peak_memory_bytes"]),
            peak_memory_step_bytes=int(metrics["peak_memory_step_bytes"]),
        )


# JSON key -> UpdateFigures field, where they differ; ``kl`` is written as well as ``kl_reference``.
_UPDATE_KEYS = {"step_time_s": "update_s", "kl": "kl_reference"}
_UPDATE_OPTIONAL = (
    "tis_fraction", "grad_norm", "plan_s", "peak_memory_bytes", "peak_memory_step_bytes", "tokens_lower_bound"
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One committed learner step: the ``steps`` row's columns and its ``metrics`` JSON, typed."""

    step: int
    policy_version: int
    update: UpdateFigures
    kl: float | None
    """The row's ``kl`` column: KL to the reference when the run has one (``kl_coef``), else to the behaviour
    policy."""
    step_time_s: float | None
    """The row's column: the learner's seconds from taking the batch to the commit (update, publish, prepare)."""
    policy_lag_mean: float | None
    """Versions between the learner and the version that sampled each trained token, averaged over tokens."""
    policy_lag_max: int = 0
    groups_trained: int = 0
    groups_stale: int = 0
    """Stale groups decided since the previous step (drops carried into the next step's row)."""
    groups_zero_variance: int = 0
    groups_set_aside: int = 0
    groups_redelivered: int = 0
    trained_group_ids: tuple[str, ...] | None = None
    """The groups it trained, in order (what a restart replays); None on rows older than the field."""
    stale_group_ids: tuple[str, ...] = ()
    set_aside: tuple[SetAside, ...] = ()
    strategy: str | None = None
    compute_dtype: str | None = None
    cut_fraction: float = 0.0
    """Share of the trained rollouts with a call cut by the token limit."""
    load_s: float = 0.0
    load_last_group_s: float = 0.0
    commit_prepare_s: float = 0.0
    publish_s: float = 0.0
    weights_sha256: str | None = None
    published_bytes: int | None = None
    checkpoint_write_s_previous: float | None = None
    window: StepWindow | None = None
    """Set after the commit (``services/learner/timing.py``); None on rows written before it was measured."""
    record_version: int = RECORD_VERSION

    # --- writing --------------------------------------------------------------------------------------------
    def columns(self) -> dict[str, Any]:
        """The ``steps`` row's columns (``metrics`` included)."""
        return {
            "step": self.step,
            "policy_version": self.policy_version,
            "loss": self.update.loss,
            "clip_fraction": self.update.clip_fraction,
            "kl": self.kl,
            "reward_mean": self.update.reward_mean,
            "reward_std": self.update.reward_std,
            "tokens": int(self.update.tokens_computed),
            "policy_lag_mean": self.policy_lag_mean,
            "step_time_s": self.step_time_s,
            "groups_trained": self.groups_trained,
            "groups_stale": self.groups_stale,
            "groups_zero_variance": self.groups_zero_variance,
            "groups_set_aside": self.groups_set_aside,
            "metrics": self.metrics_json(),
        }

    def metrics_json(self) -> dict[str, Any]:
        """The ``metrics`` JSON (version ``RECORD_VERSION``)."""
        update = asdict(self.update)
        out: dict[str, Any] = {_json_key(k): v for k, v in update.items() if k in _WRITTEN_UPDATE_KEYS}
        out |= {k: v for k, v in update.items() if k in _UPDATE_OPTIONAL and v is not None}
        out["kl_reference"] = self.update.kl_reference
        if self.update.no_update:
            out["no_update"] = True
        for f in fields(self):
            if f.name in _COLUMN_ONLY or f.name in ("update", "window", "set_aside"):
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        out["set_aside"] = [asdict(s) for s in self.set_aside]
        if self.window is not None:
            out |= asdict(self.window)
        return out

    def with_window(self, window: StepWindow) -> StepRecord:
        return replace(self, window=window)

    # --- reading --------------------------------------------------------------------------------------------
    @classmethod
    def from_row(cls, row: Any) -> StepRecord:
        """From a ``steps`` row: an ORM ``Step`` or a mapping of its columns (the api's ``step_metrics`` item)."""
        columns = row if isinstance(row, Mapping) else {c: getattr(row, c) for c in _COLUMN_NAMES}
        return cls.from_json(columns, columns.get("metrics") or {})

    @classmethod
    def from_json(cls, columns: Mapping[str, Any], metrics: Mapping[str, Any]) -> StepRecord:
        """From a row's columns and its ``metrics`` JSON of any version up to ``RECORD_VERSION``."""
        version = int(metrics.get("record_version", 1))
        if version > RECORD_VERSION:
            raise StepRecordError(
                f"step {columns.get('step')}: metrics record_version {version} is newer than this reader "
                f"({RECORD_VERSION}); upgrade harnessrl"
            )
        known = {f.name for f in fields(cls)} - _COLUMN_ONLY - {"update", "window", "set_aside"}
        values: dict[str, Any] = {k: _tupled(metrics[k]) for k in known if metrics.get(k) is not None}
        window = None
        if "window_end_unix" in metrics:
            window = StepWindow(**{f.name: metrics[f.name] for f in fields(StepWindow) if f.name in metrics})
        return cls(
            **values,
            step=int(columns["step"]),
            policy_version=int(columns["policy_version"]),
            update=_update_from_json(columns, metrics),
            kl=columns.get("kl"),
            step_time_s=columns.get("step_time_s"),
            policy_lag_mean=columns.get("policy_lag_mean"),
            groups_trained=int(columns.get("groups_trained") or 0),
            groups_stale=int(columns.get("groups_stale") or 0),
            groups_zero_variance=int(columns.get("groups_zero_variance") or 0),
            groups_set_aside=int(columns.get("groups_set_aside") or 0),
            set_aside=tuple(SetAside(**s) for s in metrics.get("set_aside") or ()),
            window=window,
        )

    @property
    def trained(self) -> bool:
        return not self.update.no_update


_COLUMN_ONLY = frozenset(
    {"step", "policy_version", "kl", "step_time_s", "policy_lag_mean", "groups_trained", "groups_stale",
     "groups_zero_variance", "groups_set_aside"}
)  # fmt: skip
_COLUMN_NAMES = (
    *sorted(_COLUMN_ONLY),
    "loss",
    "clip_fraction",
    "reward_mean",
    "reward_std",
    "tokens",
    "metrics",
)
_WRITTEN_UPDATE_KEYS = frozenset(
    {"loss", "clip_fraction", "kl_behavior", "kl_reference", "reward_mean", "reward_std", "loss_tokens",
     "tokens_computed", "update_s"}
)  # fmt: skip


_FIELD_KEYS = {v: k for k, v in _UPDATE_KEYS.items()}


def _json_key(name: str) -> str:
    return _FIELD_KEYS.get(name, name)


def _tupled(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _update_from_json(columns: Mapping[str, Any], metrics: Mapping[str, Any]) -> UpdateFigures:
    values: dict[str, Any] = {}
    for f in fields(UpdateFigures):
        key = _json_key(f.name)
        if metrics.get(key) is not None:
            values[f.name] = metrics[key]
        elif (
            f.name in ("loss", "clip_fraction", "reward_mean", "reward_std")
            and columns.get(f.name) is not None
        ):
            values[f.name] = columns[f.name]  # version 1 rows always had these columns
    if "tokens_computed" not in values and columns.get("tokens") is not None:
        values["tokens_computed"] = float(columns["tokens"])
    return UpdateFigures(**values)
