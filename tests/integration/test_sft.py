"""SFT runs against real Postgres, Redis and S3: the data selection (read-only, refusing what selects nothing),
the SFT learner (loss falling on its data, a version per step, the run completed, TensorBoard curves, an exact
resume), and ``POST /v1/sft`` / ``harnessrl sft`` through the real api process."""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner
from sqlalchemy import select, text

from services.cli.main import cli
from services.learner.checkpoint import checkpoint_key
from services.learner.sft_loop import SFTLearner
from shared.db import session_scope
from shared.ids import new_id
from shared.models import Reward, Rollout, Run, Step, Weight
from shared.rollout_selection import SelectionError, select_rollouts
from shared.tensorboard import read_scalars, run_logdir
from tests.fixtures import product
from tests.fixtures.product import ApiServer, task_spec
from tests.fixtures.services import run_row

pytestmark = pytest.mark.integration

api_server = product.api_server


@pytest.fixture
def recorded(learner_run):  # type: ignore[no-untyped-def]
    """A run whose recorded rollouts are the data: two groups of four, half of them rewarded 1."""
    run = learner_run(groups_per_step=2)
    run.add_group([1.0, 0.0, 1.0, 0.0], seed=1)
    run.add_group([0.0, 1.0, 0.0, 1.0], seed=2)
    return run


def _rewarded(db, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return sorted(
            session.scalars(
                select(Rollout.id).join(Reward, Reward.rollout_id == Rollout.id)
                .where(Rollout.run_id == run_id, Reward.reward >= 1.0)
            )
        )  # fmt: skip


def test_a_selection_is_read_only_and_returns_only_closed_rollouts_with_calls(settings, db, recorded) -> None:  # type: ignore[no-untyped-def]
    url, run_id = settings.database_url, recorded.run_id
    rewarded = _rewarded(db, run_id)
    assert len(rewarded) == 4
    assert sorted(select_rollouts(url, from_run=run_id, min_reward=1.0)) == rewarded
    assert len(select_rollouts(url, from_run=run_id)) == 8
    assert (
        sorted(select_rollouts(url, where=f"run_id = '{run_id}' AND reward >= 1 AND n_calls = 2")) == rewarded
    )

    def refused(field: str, match: str, **selection: object) -> None:
        with pytest.raises(SelectionError, match=match) as caught:
            select_rollouts(url, **selection)  # type: ignore[arg-type]
        assert caught.value.field == field

    refused("body.from_run", "rewarded at least 2", from_run=run_id, min_reward=2.0)
    refused("body.where", "no finished rollout", where=f"run_id = '{run_id}' AND reward > 5")
    refused("body.where", "does not run over trajectories", where="no_such_column = 1")
    refused("body.where", "does not run over trajectories", where="true; DROP TABLE runs")
    refused("body.where", "read-only", where="(SELECT nextval('calls_id_seq')) > 0")
    # A condition that breaks out of its parenthesis to union other ids selects no rollout with them.
    refused("body.where", "no finished rollout", where="false) UNION (SELECT id FROM runs")
    with session_scope(db) as session:
        assert session.execute(text("SELECT count(*) FROM runs")).scalar_one() > 0
    # A rollout still running may record more calls: it is not data until it is closed.
    with session_scope(db) as session:
        session.get(Rollout, rewarded[0]).status = "running"  # type: ignore[union-attr]
    assert rewarded[0] not in select_rollouts(url, from_run=run_id, min_reward=1.0)


def _sft_run(db, source_run_id: str, rollout_ids: list[str], model_dir: str, **sft: object) -> str:  # type: ignore[no-untyped-def]
    run_id = new_id("sft")
    spec = {"from_run": source_run_id, "min_reward": 1.0, "rollout_ids": rollout_ids, **sft}
    with session_scope(db) as session:
        row = run_row(run_id, model="tiny", model_dir=model_dir, sft=spec, grpo={"checkpoint_every": 3})
        row.status = "running"
        session.add(row)
    return run_id


def _train(settings, run_id: str, max_steps: int | None = None) -> list[float]:  # type: ignore[no-untyped-def]
    learner = SFTLearner(settings, run_id)
    try:
        learner.run(max_steps=max_steps)
    finally:
        learner.close()
    return [r.update.loss for r in _records(settings, run_id)]


def _records(settings, run_id: str):  # type: ignore[no-untyped-def]
    from shared.db import make_engine
    from shared.step_record import StepRecord

    engine = make_engine(settings.database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(Step).where(Step.run_id == run_id).order_by(Step.step)).all()
            return [StepRecord.from_row(row._mapping) for row in rows]
    finally:
        engine.dispose()


def test_sft_lowers_the_loss_publishes_a_version_per_step_and_completes(  # type: ignore[no-untyped-def]
    settings, db, store, recorded, tiny_model_dir
) -> None:
    rewarded = _rewarded(db, recorded.run_id)
    run_id = _sft_run(db, recorded.run_id, rewarded, str(tiny_model_dir), epochs=4, batch_rollouts=4,
                      learning_rate=1e-3)  # fmt: skip
    losses = _train(settings, run_id)
    assert len(losses) == 4 and all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < losses[0] - 1.0, losses
    records = _records(settings, run_id)
    assert [r.update.loss_tokens for r in records] == [64.0] * 4  # 4 rollouts x 2 calls x 8 sampled ids
    assert all(r.update.tokens_computed > 0 and r.update.reward_mean == 1.0 for r in records)
    with session_scope(db) as session:
        run = session.get(Run, run_id)
        assert run is not None and (run.kind, run.status, run.policy_version) == ("sft", "completed", 4)
        weights = session.scalars(
            select(Weight).where(Weight.run_id == run_id).order_by(Weight.version)
        ).all()
    assert [w.version for w in weights] == [1, 2, 3, 4]
    assert [w.sha256 for w in weights] == [r.weights_sha256 for r in records]
    assert hashlib.sha256(store.get_bytes(weights[-1].object_key)).hexdigest() == weights[-1].sha256
    scalars = read_scalars(run_logdir(settings, run_id))
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3, 4]
    assert [value for _, value in scalars["train/loss"]] == pytest.approx(losses, rel=1e-5)
    assert all(value > 0 for _, value in scalars["train/tokens_per_s"])


def test_a_restarted_sft_learner_replays_to_the_same_weights(  # type: ignore[no-untyped-def]
    settings, db, store, recorded, tiny_model_dir
) -> None:
    rewarded = _rewarded(db, recorded.run_id)
    shape = {"epochs": 2, "batch_rollouts": 2, "learning_rate": 1e-3, "seed": 3}  # 4 steps, shuffled batches
    whole = _sft_run(db, recorded.run_id, rewarded, str(tiny_model_dir), **shape)
    _train(settings, whole)
    cut = _sft_run(db, recorded.run_id, rewarded, str(tiny_model_dir), **shape)
    _train(settings, cut, max_steps=2)  # no checkpoint yet (every 3 steps): the restart replays steps 1-2
    learner = SFTLearner(settings, cut)
    try:
        assert learner.replay_report is not None and learner.replay_report["matches_published"]
        assert learner.replay_report["steps"] == [1, 2]
        learner.run()
    finally:
        learner.close()
    assert [r.weights_sha256 for r in _records(settings, cut)] == [
        r.weights_sha256 for r in _records(settings, whole)
    ]
    # The last step's checkpoint lost (a crash after its commit, before the write): resume from step 3's.
    assert checkpoint_key(cut, 4) in store.list(f"checkpoints/{cut}/")
    store.delete(checkpoint_key(cut, 4))
    learner = SFTLearner(settings, cut)
    try:
        assert learner.replay_report is not None
        assert (learner.replay_report["from_checkpoint"], learner.replay_report["steps"]) == (3, [4])
        assert learner.replay_report["matches_published"] and learner.run() == 0
    finally:
        learner.close()


def test_post_sft_checks_the_selection_before_writing_and_the_cli_prints_the_run_id(  # type: ignore[no-untyped-def]
    api_server: ApiServer, settings_env, db, recorded, tiny_model_dir
) -> None:
    with api_server.client() as api:
        count = "SELECT count(*) FROM runs WHERE kind = 'sft'"
        with session_scope(db) as session:
            before = session.execute(text(count)).scalar_one()
        for body, loc in (
            ({}, "body"),
            ({"from_run": recorded.run_id, "where": "true"}, "body"),
            ({"where": "reward >= 1", "min_reward": 1.0}, "body"),
            ({"from_run": "run_missing"}, "body.from_run"),
            ({"from_run": recorded.run_id, "min_reward": 5.0}, "body.from_run"),
            ({"where": "not a condition"}, "body.where"),
            ({"from_run": recorded.run_id, "epochs": 0}, "body.epochs"),
            ({"from_run": recorded.run_id, "epochs": 100_000, "batch_rollouts": 1}, "body.epochs"),
            ({"from_run": recorded.run_id, "grpo": {"clip_low": 2}}, "body.grpo.clip_low"),
        ):
            response = api.post("/v1/sft", json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["detail"][0]["loc"] == loc, (body, response.json())
        with session_scope(db) as session:
            assert session.execute(text(count)).scalar_one() == before  # nothing half-written
        created = api.post("/v1/sft", json={"from_run": recorded.run_id, "min_reward": 1, "epochs": 2,
                                            "batch_rollouts": 3, "lora": {"rank": 4}})  # fmt: skip
        assert created.status_code == 201, created.text
        detail = created.json()
        assert (detail["kind"], detail["status"], detail["steps"]) == ("sft", "running", 4)
        assert sorted(detail["config"]["sft"]["rollout_ids"]) == _rewarded(db, recorded.run_id)
        assert detail["config"]["lora"]["rank"] == 4
        assert api.get(f"/v1/runs/{detail['id']}").json()["kind"] == "sft"
        assert api.post(f"/v1/runs/{detail['id']}/stop").json()["status"] == "stopping"

        # Its published version is what a GRPO run starts from (--init) and what an eval evaluates (--run).
        sft_id = detail["id"]
        with session_scope(db) as session:
            key = f"weights/{sft_id}/1/model.safetensors"
            session.add(Weight(run_id=sft_id, version=1, object_key=key, status="published", sha256="0" * 64))
            session.execute(text("UPDATE runs SET policy_version = 1 WHERE id = :id"), {"id": sft_id})
        run = {"model": "policy", "harness": "reference", "tasks": [task_spec("sft-init")], "group_size": 1}
        for init, loc in (
            ({"run_id": "run_missing"}, "body.init.run_id"),
            ({"run_id": sft_id, "version": 2}, "body.init.version"),
        ):
            response = api.post("/v1/runs", json={**run, "init": init})
            assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc, response.text
        lora = api.post("/v1/runs", json={**run, "init": {"run_id": sft_id}, "lora": {"rank": 4}})
        assert lora.status_code == 422 and lora.json()["detail"][0]["loc"] == "body.init", lora.text
        started = api.post("/v1/runs", json={**run, "init": {"run_id": sft_id}})
        assert started.status_code == 201, started.text
        assert started.json()["config"]["init"] == {"run_id": sft_id, "version": 1}  # the newest, resolved
        evaluate = {"harness": "reference", "tasks": [task_spec("sft-eval")], "run_id": sft_id}
        evaluated = api.post("/v1/evals", json=evaluate)
        assert evaluated.status_code == 201, evaluated.text
        assert (evaluated.json()["source"], evaluated.json()["version"]) == ("weights", 1)
        of_init = api.post("/v1/evals", json={**evaluate, "run_id": started.json()["id"], "version": 0})
        assert (of_init.json()["source"], of_init.json()["source_run_id"], of_init.json()["version"]) == (
            "weights",
            sft_id,
            1,
        )  # the started run's version 0 is the SFT version it started from
        for run_id in (started.json()["id"], evaluated.json()["id"], of_init.json()["id"]):
            api.post(f"/v1/runs/{run_id}/stop")

    env = {**settings_env, "HARNESSRL_API_URL": api_server.url}
    where = f"run_id = '{recorded.run_id}' AND reward >= 1"
    result = CliRunner().invoke(
        cli, ["sft", "--where", where, "--epochs", "3", "--learning-rate", "1e-4"], env=env
    )
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    with session_scope(db) as session:
        run = session.get(Run, run_id)
        assert run is not None and run.kind == "sft"
        assert run.config["sft"]["where"] == where and run.config["sft"]["learning_rate"] == 1e-4
        session.execute(text("UPDATE runs SET status = 'stopped' WHERE id = :id"), {"id": run_id})
    refused = CliRunner().invoke(cli, ["sft", "--where", "reward > 99"], env=env)
    assert refused.exit_code == 1 and "no finished rollout" in refused.output
    both = CliRunner().invoke(cli, ["sft", "--where", "true", "--from-run", recorded.run_id], env=env)
    assert both.exit_code == 2 and "--from-run RUN" in both.output


def test_a_training_run_started_from_an_sft_version_trains_from_its_weights(  # type: ignore[no-untyped-def]
    settings, db, store, recorded, tiny_model_dir
) -> None:
    """``--init SFT_RUN@N``: the GRPO learner's policy (and reference) start as the SFT run's version N."""
    import torch

    from services.learner.loop import Learner, LearnerError
    from services.learner.publish import read_published

    rewarded = _rewarded(db, recorded.run_id)
    sft_id = _sft_run(db, recorded.run_id, rewarded, str(tiny_model_dir), epochs=2, batch_rollouts=4,
                      learning_rate=1e-3)  # fmt: skip
    _train(settings, sft_id)
    with session_scope(db) as session:
        weight = session.scalars(select(Weight).where(Weight.run_id == sft_id, Weight.version == 2)).one()
        key, sha256 = weight.object_key, weight.sha256
    sft_weights = read_published(store, key, sha256)

    def grpo_run(init: dict[str, object]) -> str:
        run_id = new_id("run")
        with session_scope(db) as session:
            session.add(run_row(run_id, model="tiny", model_dir=str(tiny_model_dir), init=init,
                                grpo={"kl_coef": 0.1}))  # fmt: skip
        return run_id

    learner = Learner(settings, grpo_run({"run_id": sft_id, "version": 2}), consumer="c1")
    try:
        for model in (learner.model, learner.reference):
            state = model.state_dict()  # type: ignore[union-attr]
            assert all(torch.equal(state[name], tensor) for name, tensor in sft_weights.items())
    finally:
        learner.close()
    with pytest.raises(LearnerError, match="no such published version"):
        Learner(settings, grpo_run({"run_id": sft_id, "version": 9}), consumer="c1")
