"""TensorBoard event files of a run (``shared/tensorboard.py``), read back with TensorBoard's own reader: two
writers (the learner's steps, the api's evals) in one run's folder, every scalar at its step; a remote store gets
a copy of each file."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.settings import Settings
from shared.tensorboard import ScalarLog, object_prefix, read_scalars, remote_logdir, run_logdir

pytestmark = pytest.mark.unit


class RecordingStore:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put_file(self, key: str, path: Path) -> None:
        self.files[key] = path.read_bytes()


def test_steps_and_evals_read_back_from_the_run_folder(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, _env_file=None)  # type: ignore[call-arg]
    learner, api = ScalarLog(settings, writer="learner"), ScalarLog(settings, writer="api")
    for step, loss in ((1, 0.5), (2, 0.25), (3, 0.125)):
        learner.write(
            "run_a", step, {"train/loss": loss, "train/kl": None, "train/tokens_computed": 100 * step}
        )
    api.write("run_a", 0, {"eval/pass_at_1": 0.25})
    api.write("run_a", 3, {"eval/pass_at_1": 0.5})
    api.write("eval_b", 3, {"eval/pass_at_1": 0.5})
    learner.close()
    api.close()

    scalars = read_scalars(run_logdir(settings, "run_a"))
    assert scalars["train/loss"] == [(1, 0.5), (2, 0.25), (3, 0.125)]
    assert scalars["train/tokens_computed"] == [(1, 100.0), (2, 200.0), (3, 300.0)]
    assert "train/kl" not in scalars  # a metric the step did not have is skipped, not written as 0
    assert scalars["eval/pass_at_1"] == [(0, 0.25), (3, 0.5)]
    assert len(list(run_logdir(settings, "run_a").glob("events.out.tfevents.*"))) == 2
    assert read_scalars(run_logdir(settings, "eval_b")) == {"eval/pass_at_1": [(3, 0.5)]}
    assert remote_logdir(settings, "run_a") is None


def test_a_remote_store_gets_every_write(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, object_store_url="s3://bucket", _env_file=None)  # type: ignore[call-arg]
    store = RecordingStore()
    log = ScalarLog(settings, store, writer="learner")  # type: ignore[arg-type]
    log.write("run_a", 1, {"train/loss": 1.0})
    log.write("run_a", 2, {"train/loss": 0.5})
    [(key, data)] = store.files.items()
    assert key.startswith(object_prefix("run_a")) and key.endswith(".learner")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / key.rsplit("/", 1)[1]).write_bytes(data)
    assert read_scalars(copy) == {"train/loss": [(1, 1.0), (2, 0.5)]}
    assert remote_logdir(settings, "run_a") == "s3://bucket/tensorboard/run_a/"
    log.close()


def test_run_logdir_prints_the_folder_and_its_store_copy(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from services.cli.main import cli

    env = {"HARNESSRL_DATA_DIR": str(tmp_path), "HARNESSRL_OBJECT_STORE_URL": "file://"}
    local = CliRunner().invoke(cli, ["run", "logdir", "run_a"], env=env)
    assert (local.exit_code, local.output) == (0, f"{tmp_path / 'tensorboard' / 'run_a'}\n")
    remote = CliRunner().invoke(
        cli, ["run", "logdir", "run_a"], env={**env, "HARNESSRL_OBJECT_STORE_URL": "s3://b"}
    )
    assert remote.output.splitlines() == [
        str(tmp_path / "tensorboard" / "run_a"),
        "s3://b/tensorboard/run_a/",
    ]
