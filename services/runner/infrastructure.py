"""What the runner checks about the infrastructure around an attempt (the evidence rules: ``shared/statuses.py``).

- ``preflight``: before an attempt starts, the gateway answers on its socket and the inference pool is ready.
  If not, the rollout waits (``rollout.defer``) without spending an attempt: a harness started now would only
  fail for a reason that is not the model's.
- ``Watch``: service boot counters read when the attempt starts; ``Watch.evidence`` after the harness ended
  gathers the gateway's incidents for the rollout, the gateway or inference processes that (re)started
  meanwhile, and whether the gateway still answers.

Everything here tolerates Redis being down (less evidence, never a crash): the attempt's result then stands.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path

import redis

from shared.incidents import Incident, boot_counts, new_incident, restarted_services, take_incidents
from shared.pool import get_served

log = logging.getLogger(__name__)

REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def gateway_answers(socket_path: Path, timeout_s: float = 3.0) -> bool:
    """Whether the gateway answers ``GET /healthz`` with 200 on its Unix socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(str(socket_path))
            conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: gateway\r\n\r\n")
            head = conn.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.") and head[9:12] == b"200"


def preflight(socket_path: Path, r: redis.Redis) -> str | None:
    """Why an attempt should not start now, or None."""
    if not gateway_answers(socket_path):
        return f"the gateway does not answer on {socket_path}"
    try:
        served = get_served(r)
    except REDIS_ERRORS as exc:
        return f"Redis is unreachable: {exc}"
    if served is not None and not served.ready:
        return served.describe()
    return None


@dataclass
class Watch:
    """Boot counters at the start of an attempt, to compare with at its end."""

    rollout_id: str
    socket_path: Path
    boots: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, r: redis.Redis, rollout_id: str, socket_path: Path) -> Watch:
        watch = cls(rollout_id, socket_path)
        with contextlib.suppress(*REDIS_ERRORS):
            watch.boots = boot_counts(r)
        return watch

    def evidence(self, r: redis.Redis) -> list[Incident]:
        """The infrastructure incidents of the attempt, oldest first (read once: the gateway's are cleared)."""
        incidents: list[Incident] = []
        try:
            incidents += take_incidents(r, self.rollout_id)
            restarted = restarted_services(self.boots, boot_counts(r)) if self.boots else []
        except REDIS_ERRORS as exc:
            log.warning("rollout %s: no infrastructure evidence from Redis: %s", self.rollout_id, exc)
            restarted = []
        incidents += [
            new_incident(f"{service}_restarted", f"the {service} service (re)started during the attempt")
            for service in restarted
        ]
        if not gateway_answers(self.socket_path):
            incidents.append(
                new_incident("gateway_unreachable", f"the gateway does not answer on {self.socket_path}")
            )
        return incidents
