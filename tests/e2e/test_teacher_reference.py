"""``--teacher reference`` end to end: a collection run on swe_micro train tasks through the real, sandboxed
mini-swe-agent CLI (its text-based config, and its tool-calling one) and Claude Code (``--bare``), a gateway process, Celery runner and grader
workers, Postgres, Redis and S3. The demonstrator reads the file, applies the reference fix, runs the tests and
submits, as mini-swe-agent's one fenced block per answer or as calls of its bash tool (Claude Code: its ``Bash``
tool, and a closing sentence for the last step); every rollout is multi-turn,
recorded as one chain with ``source = teacher`` and no logprobs, and the grader rewards it 1 like any rollout. The
policy (the scripted policy upstream) is never asked."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from shared.datasets import load_dataset, reference_patch
from shared.db import session_scope
from shared.ids import new_id
from shared.models import Call, Group, Reward, Rollout
from shared.models import Task as TaskRow
from shared.queues import ROLLOUTS_QUEUE
from shared.trajectory import TEACHER, load_chain, load_segment
from tests.e2e.test_rollout_groups import enqueue, wait_for_group
from tests.fixtures.services import run_row

pytestmark = pytest.mark.e2e

CASES = {
    # mini_textbased: one fenced command block per answer, no tools
    "text": ({"name": "mini-swe-agent"}, ("clamp-1", "leap-year-1")),
    # mini's default config: every answer calls its one bash tool, in the student's tool-call format
    "toolcall": ({"name": "mini-swe-agent", "config": "mini"}, ("sum-evens-1",)),
    # claude -p --bare: Bash calls, then a closing sentence (the agent ends when the model stops calling tools)
    "claude-code-bare": ({"name": "claude-code", "bare": True, "max_turns": 8}, ("clamp-1",)),
}
TOOL_CALLS = {"text": 0, "toolcall": 5, "claude-code-bare": 4}


def collection_run(db, harness: dict, instance_ids: tuple[str, ...]) -> list[str]:  # type: ignore[no-untyped-def]
    """The rows ``harnessrl run create --harness mini-swe-agent --dataset swe_micro --split train --teacher
    reference --group-size 1`` writes (tasks upserted under their bundled dataset, whose solutions the gateway
    reads): one group of one rollout per task. Returns the group ids."""
    tasks = {t.instance_id: t for t in load_dataset("swe_micro", "train")}
    groups = []
    with session_scope(db) as session:
        run = run_row(new_id("run"), harness, group_size=1, teacher={"kind": "reference"})
        session.add(run)
        session.flush()
        for instance_id in instance_ids:
            spec = tasks[instance_id].model_dump(mode="json")
            statement = insert(TaskRow).values(
                id=new_id("task"), dataset="swe_micro", instance_id=instance_id, spec=spec
            )
            task_id = session.scalar(
                statement.on_conflict_do_update(
                    constraint="uq_tasks_dataset_instance", set_={"spec": statement.excluded.spec}
                ).returning(TaskRow.id)
            )
            group = Group(id=new_id("grp"), run_id=run.id, task_id=task_id, step=0, size=1, status="running")
            session.add(group)
            session.flush()
            session.add(
                Rollout(
                    id=new_id("ro"), run_id=run.id, group_id=group.id, task_id=task_id, index_in_group=0,
                    harness=harness["name"],
                )
            )  # fmt: skip
            groups.append(group.id)
    return groups


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_reference_teacher_collects_multi_turn_rollouts_the_grader_rewards(  # type: ignore[no-untyped-def]
    case, celery_workers, scripted_gateway, scripted_policy, settings, db, store, tiny_model_dir
):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    env = {"HARNESSRL_GATEWAY_SOCKET": str(scripted_gateway.socket)}
    workers = [
        celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env),
        celery_workers("services.grader.tasks", ["grading"], env),
    ]
    harness, instance_ids = CASES[case]
    group_ids = collection_run(db, harness, instance_ids)
    with session_scope(db) as session:
        rollout_ids = list(session.scalars(select(Rollout.id).where(Rollout.group_id.in_(group_ids))))
    enqueue(settings, rollout_ids)
    for group_id in group_ids:
        wait_for_group(db, group_id, 180, workers + [scripted_gateway])

    with session_scope(db) as session:
        for rollout_id in rollout_ids:
            rollout = session.get(Rollout, rollout_id)
            assert rollout is not None and rollout.status == "graded", (rollout.status, rollout.error)
            reward = session.scalar(select(Reward).where(Reward.rollout_id == rollout_id))
            assert reward is not None and reward.reward == 1.0 and reward.resolved, rollout.outcome_reason
            calls = list(
                session.scalars(select(Call).where(Call.rollout_id == rollout_id).order_by(Call.position))
            )
            # look, read, write the fix, test, submit: five model calls, one chain the splice kept, all the teacher's
            assert len(calls) == 5, [c.finish_reason for c in calls]
            # the test step ran the task's tests in the agent's shell (the sandbox venv's python on its PATH)
            observed = tokenizer.decode(load_segment(store, calls[4].tokens_key).suffix_ids.tolist())
            assert "passed" in observed and "not found" not in observed, observed[-600:]
            assert len({c.chain_id for c in calls}) == 1 and all(c.fork_reason is None for c in calls)
            assert all(c.source == TEACHER and c.notes["teacher"] == "reference" for c in calls)
            assert sum(c.tool_call_count for c in calls) == TOOL_CALLS[case]
            chain = load_chain(store, calls)
            assert all(s.source == TEACHER and np.isnan(s.sampled_logprobs).all() for s in chain.calls)
            # the workspace's diff is the reference fix: its added lines, and nothing the demonstration left behind
            patch = store.get_bytes(rollout.patch_key or "").decode()
            fix = reference_patch("swe_micro", session.get(TaskRow, rollout.task_id).instance_id)  # type: ignore[union-attr]
            added = [line for line in fix.splitlines() if line.startswith("+") and not line.startswith("+++")]
            assert added and all(line in patch.splitlines() for line in added), patch
            assert "junit" not in patch and "COMPLETE_TASK" not in patch
    assert not scripted_policy.requests, "the policy was asked to sample"
