"""SFT runs: supervised fine-tuning on recorded rollouts (``POST /v1/sft``, ``harnessrl sft``), created here.

An SFT run is a run of kind ``sft`` whose config carries an ``sft`` section (``shared/run_config.py:
SFTConfig``). Every check happens before anything is written: the selection (``from_run`` + ``min_reward``, or a
``where`` condition over ``trajectories``) is resolved read-only (``shared/rollout_selection.py``) and stored as
the run's ``rollout_ids``; a selection that is malformed, selects nothing, or spans runs of different models is a
422 naming the field. The run is created ``running``: it samples nothing, so it never waits for the inference
pool; the learner controller starts its learner (``services/learner/sft_loop.py``), which completes it.

The model it trains is the one that recorded the data: the selected rollouts' runs' ``model_dir`` (null = the
served model), their model alias and harness copied for the run's listing.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.api.errors import Invalid
from services.api.schemas import SFTCreate
from shared.ids import new_id
from shared.models import Rollout, Run
from shared.rollout_selection import SelectionError, check_text, select_rollouts
from shared.run_config import MAX_STEPS, RunConfig, RunConfigError, SFTConfig, SFTSpec, read_run_config
from shared.settings import Settings
from shared.statuses import RunStatus


async def _source_config(session: AsyncSession, rollout_ids: list[str]) -> RunConfig:
    """The config of the runs that recorded the selection, which must agree on the model (its directory)."""
    run_ids = (
        await session.scalars(select(Rollout.run_id).where(Rollout.id.in_(rollout_ids)).distinct())
    ).all()
    configs: dict[str, RunConfig] = {}
    for run in (await session.scalars(select(Run).where(Run.id.in_(run_ids)).order_by(Run.created_at))).all():
        try:
            configs[run.id] = read_run_config(run)
        except RunConfigError as exc:
            raise Invalid.field("body", f"a selected rollout's run cannot be read: {exc}") from None
    model_dirs = {config.model_dir for config in configs.values()}
    if len(model_dirs) > 1:
        shown = ", ".join(sorted(str(d or "the served model") for d in model_dirs))
        raise Invalid.field(
            "body", f"the selection spans runs of different models ({shown}): select one model's"
        )
    return next(iter(configs.values()))


async def create_sft(session: AsyncSession, body: SFTCreate, settings: Settings) -> Run:
    """Create an SFT run (``running``) on the selected rollouts; nothing is written on a bad request."""
    try:
        check_text("body.from_run", body.from_run)
        if body.from_run is not None and await session.get(Run, body.from_run) is None:
            raise Invalid.field("body.from_run", f"no run {body.from_run!r}")
        rollout_ids = await asyncio.to_thread(
            select_rollouts,
            settings.database_url,
            from_run=body.from_run,
            min_reward=body.min_reward,
            where=body.where,
        )
    except SelectionError as exc:
        raise Invalid.field(exc.field, exc.message) from None
    spec = SFTConfig(**{name: getattr(body, name) for name in SFTSpec.model_fields}, rollout_ids=rollout_ids)
    if spec.steps > MAX_STEPS:
        raise Invalid.field(
            "body.epochs",
            f"{spec.epochs} epochs of {spec.steps_per_epoch()} steps are {spec.steps} steps, over {MAX_STEPS}: "
            "take fewer epochs or larger batches",
        )
    source = await _source_config(session, rollout_ids)
    config = RunConfig(
        model=source.model,
        harness=source.harness,
        group_size=1,
        steps=spec.steps,
        grpo=body.grpo,
        lora=body.lora,
        dataset=source.dataset,
        model_dir=source.model_dir,
        sft=spec,
    )
    run = Run.create(new_id("sft"), config, name=body.name, status=RunStatus.RUNNING, policy_version=0)
    session.add(run)
    await session.flush()
    await session.refresh(run)
    return run
