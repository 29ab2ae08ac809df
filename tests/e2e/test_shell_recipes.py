"""The two ``shell`` recipes of docs/harnesses.md#shell-harness-any-installed-agent (issue 16), each an
agent installed where a user would put it (``scripts/install-recipe-agents.sh``), run by the runner in the sandbox through the real gateway, driven by the
scripted policy: a Node CLI installed with npm into its own prefix (Qwen Code) and a Python agent in its own
virtual environment (mini-swe-agent). Each mounts its install read-only, gets its config files from a home
template and the gateway's URL and key through placeholders, writes the file, and its calls form ONE chain whose
every prompt is the previous prompt + the previous sampled ids + the new suffix."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.models import Call, Chain, Rollout
from shared.trajectory import load_segment
from tests.fixtures.scripted_policy import MINI_SWE_AGENT_SCRIPT

pytestmark = [pytest.mark.e2e]

RECIPES = Path(os.environ.get("HARNESSRL_RECIPES_DIR", "/opt/harnessrl/recipes"))
QWEN_PREFIX = RECIPES / "qwen-code"
MINI_VENV = RECIPES / "mini-swe-agent"
QWEN_SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "model": {"generationConfig": {"maxRetries": 0}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False},
    "tools": {"approvalMode": "yolo"},
}


@pytest.fixture
def home_template() -> Iterator[Path]:
    """A template folder the sandbox user can reach (pytest's tmp_path sits under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="harnessrl-template-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_template(root: Path, files: dict[str, str]) -> str:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for entry in [root, *root.rglob("*")]:
        entry.chmod(0o755 if entry.is_dir() else 0o644)
    return str(root)


def node_cli_recipe(template: Path) -> dict[str, object]:
    """Qwen Code, installed with ``npm install --global --prefix $RECIPES/qwen-code @qwen-code/qwen-code``."""
    return {
        "name": "shell",
        "command": f"{QWEN_PREFIX}/bin/qwen --auth-type openai --approval-mode yolo --output-format json {{instruction}}",
        "mounts": [str(QWEN_PREFIX)],
        "home_template": write_template(template, {".qwen/settings.json": json.dumps(QWEN_SETTINGS)}),
        "env": {
            "OPENAI_BASE_URL": "{base_url}",
            "OPENAI_API_KEY": "{api_key}",
            "OPENAI_MODEL": "{model}",
            "QWEN_CODE_NO_RELAUNCH": "1",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        },
        "provider_api": "openai_chat",
    }


def python_agent_recipe(template: Path) -> dict[str, object]:
    """mini-swe-agent, installed with ``python3 -m venv $RECIPES/mini-swe-agent && .../pip install mini-swe-agent``."""
    return {
        "name": "shell",
        "command": f"{MINI_VENV}/bin/mini --model openai/{{model}} --task {{instruction}} --yolo --exit-immediately --cost-limit 0",
        "mounts": [str(MINI_VENV)],
        "home_template": write_template(
            template,
            {".config/mini-swe-agent/.env": "MSWEA_CONFIGURED=true\nMSWEA_COST_TRACKING=ignore_errors\n"},
        ),
        "env": {
            "OPENAI_BASE_URL": "{base_url}",
            "OPENAI_API_BASE": "{base_url}",
            "OPENAI_API_KEY": "{api_key}",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
        "provider_api": "openai_chat",
    }


RECIPES_UNDER_TEST = {
    "node-cli-own-prefix": (node_cli_recipe, QWEN_PREFIX / "bin" / "qwen", None),
    "python-agent-own-venv": (python_agent_recipe, MINI_VENV / "bin" / "mini", MINI_SWE_AGENT_SCRIPT),
}


@pytest.mark.parametrize("recipe", sorted(RECIPES_UNDER_TEST))
def test_shell_recipe_runs_an_installed_agent_as_one_chain(  # type: ignore[no-untyped-def]
    recipe, scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts, home_template
):
    build, binary, script = RECIPES_UNDER_TEST[recipe]
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run scripts/install-recipe-agents.sh (make install does)")
    if script is not None:
        scripted_policy.set_script(script)
    settings = scripted_gateway.settings
    # Qwen Code's V8 reserves far more address space than it uses (see the qwen-code adapter): the run's limit.
    _, _, [rollout_id] = make_rollouts(toy_task, build(home_template), limits={"memory_bytes": 64 * 1024**3})
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    outcome = execute_attempt(settings, db, store, sandbox, attempt)

    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stdout = store.get_bytes(f"{rollout.logs_key}/harness.stdout").decode()[-2500:]
        stderr = store.get_bytes(f"{rollout.logs_key}/harness.stderr").decode()[-2500:]
        detail = f"{rollout.outcome} {rollout.error}\nstdout: {stdout}\nstderr: {stderr}"
        assert outcome.status == "finished" and rollout.harness_outcome == "completed", detail
        calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.id)))
        chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
        patch = store.get_bytes(rollout.patch_key or "")

    assert b"+++ b/hello.txt" in patch and b"\n+hi\n" in patch, patch.decode(errors="replace")
    assert len(chains) == 1 and chains[0].fork_reason is None, [c.fork_reason for c in chains]
    assert len(calls) >= 4 and sum(c.tool_call_count for c in calls) >= 3, detail
    received = [request["prompt_ids"] for request in scripted_policy.requests]
    assert len(received) == len(calls)
    seen: list[int] = []
    for call, prompt_ids in zip(calls, received, strict=True):
        segment = load_segment(store, call.tokens_key)
        seen += segment.suffix_ids.tolist()
        assert seen == prompt_ids, f"call {call.position}: the prompt is not the spliced chain"
        seen += segment.sampled_ids.tolist()
