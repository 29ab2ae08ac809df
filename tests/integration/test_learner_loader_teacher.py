"""The learner's loader sets aside a group holding a teacher's calls (``services/learner/loader.py``): GRPO has no
behaviour logprob for them, so they are never trained on, and the reason names the teacher and SFT."""

from __future__ import annotations

import pytest

from services.learner.loader import GroupSetAside, load_group
from shared.db import session_scope

pytestmark = pytest.mark.integration


def test_a_group_with_teacher_calls_is_set_aside_with_the_reason(db, store, learner_run) -> None:  # type: ignore[no-untyped-def]
    run = learner_run()
    taught = run.add_group([1.0, 0.0, 1.0, 0.0], seed=7, corrupt="teacher")
    policy = run.add_group([1.0, 0.0, 1.0, 0.0], seed=8)
    with session_scope(db) as session:
        with pytest.raises(GroupSetAside, match=r"1 of its calls were answered by a teacher.*SFT"):
            load_group(session, store, taught, 0)
        loaded = load_group(session, store, policy, 0)
    assert len(loaded.rollouts) == 4 and all(c.teacher_calls == 0 for r in loaded.rollouts for c in r.chains)
