"""A teacher is the gateway's, never the sandbox's: a harness whose calls a ``--teacher URL`` answers cannot reach
that endpoint (the sandbox has no network but the gateway's socket) and cannot read its URL or the API key the
gateway sends it (the key lives in the gateway's environment, named by ``api_key_env``; the run config stays in
Postgres). The attack is a shell harness in the real sandbox, run by the real runner against the real gateway
process, whose teacher is the scripted policy speaking OpenAI chat on a loopback port."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from shared.db import session_scope
from shared.models import Call

pytestmark = [pytest.mark.e2e]

KEY_ENV = "HARNESSRL_API_TOKEN"
"""A variable the gateway process has (the test settings' own secret), standing in for the teacher's key."""


def test_a_sandboxed_harness_cannot_reach_or_read_its_teacher(  # type: ignore[no-untyped-def]
    attack, toy_task, scripted_policy, settings, db
):
    teacher_url = scripted_policy.url + "/v1"
    host_port = scripted_policy.url.removeprefix("http://")
    script = "\n".join(
        [
            "env > sandbox-env.txt",
            "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' > sandbox-procs.txt",
            f"python3 -c \"import urllib.request; urllib.request.urlopen('{teacher_url}/models', timeout=5)\" "
            ">/dev/null 2>&1 && echo reached > teacher.txt || echo unreachable > teacher.txt",
        ]
    )
    result = attack(
        toy_task,
        script,
        grade=False,
        teacher={"kind": "url", "base_url": teacher_url, "api_key_env": KEY_ENV, "model": "teacher-model"},
    )
    assert result.patch is not None, result
    patch = result.patch.decode(errors="replace")
    # The harness's call was answered by the teacher, with the key (so the key was there to leak) ...
    with session_scope(db) as session:
        sources = list(session.scalars(select(Call.source).where(Call.rollout_id == result.rollout_id)))
    assert sources == ["teacher"], (sources, result.error)
    asked = [r for r in scripted_policy.requests if r["path"] == "/v1/chat/completions"]
    assert asked and asked[-1]["authorization"] == f"Bearer {settings.api_token}"
    # ... but the endpoint is out of reach from the sandbox, and nothing in it names the endpoint or holds the key.
    assert "+unreachable" in patch and "+reached" not in patch
    assert settings.api_token not in patch
    assert host_port not in patch and "teacher-model" not in patch and KEY_ENV not in patch
