"""The control of the red-team suite: the ``attack`` harness grades an honest fix 1.0 and an untouched bug 0.0, so
a security test's "reward 0" means the wall held, not that the harness cannot reward anything."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.e2e]


def test_an_honest_fix_earns_one_and_no_change_earns_zero(attack, toy_task) -> None:  # type: ignore[no-untyped-def]
    fixed = attack(toy_task, "printf \"def greet():\\n    return 'hello'\\n\" > greet.py")
    assert fixed.status == "graded", fixed.error
    assert fixed.reward == 1.0, fixed
    assert b"+    return 'hello'" in (fixed.patch or b"")

    untouched = attack(toy_task, "true")
    assert untouched.status == "graded", untouched.error
    assert untouched.reward == 0.0, untouched
