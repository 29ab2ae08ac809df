"""``bench learner --ranks``: which torchrun failures are relaunched (gloo's connect-time abort) and which are not."""

from __future__ import annotations

import pytest

from benchmarks.learner_ranks import gloo_aborted

pytestmark = pytest.mark.unit

# As torchrun reported it in a CI run (2 gloo ranks, FSDP2 bench), shortened.
GLOO_ABORT = """terminate called without an active exception
terminate called without an active exception
E1201 22:44:55.733000 31069 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 0
Traceback (most recent call last):
  File "torch/distributed/run.py", line 1028, in main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
  exitcode  : -6 (pid: 31074)  (SIGABRT)
  traceback : Signal 6 (SIGABRT) received by PID 31074
"""
RANK_ERROR = """Traceback (most recent call last):
  File "benchmarks/learner_ranks.py", line 60, in worker
RuntimeError: shapes do not match
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
  exitcode  : 1 (pid: 31074)
"""


def test_only_gloos_abort_is_relaunched() -> None:
    assert gloo_aborted(GLOO_ABORT)
    assert not gloo_aborted(RANK_ERROR)
    assert not gloo_aborted("")
