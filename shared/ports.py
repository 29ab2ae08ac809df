"""Picking a TCP port for a process this one is about to start.

A port taken from the kernel with ``bind(port 0)`` comes from the ephemeral range, the range the kernel also hands
out to every outgoing connection: between our release of the port and the child's bind, any connection on the
machine (a Postgres or Redis client, an HTTP request) can take it as its local port, and the child dies with
"address already in use". ``free_port`` picks outside that range instead, where only a deliberate bind lands, and
never hands out one port twice in a process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)
LOWEST = 10000
"""Below this live well-known services' ports (Postgres 5432, Redis 6379, 8000-range dev servers)."""
_handed_out: set[int] = set()
_lock = threading.Lock()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (inclusive)."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def candidate_ranges() -> list[range]:
    """Ports outside the ephemeral range, above ``LOWEST``."""
    low, high = ephemeral_range()
    ranges = [range(LOWEST, low), range(high + 1, 65536)]
    return [r for r in ranges if len(r) > 0]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to on ``host`` right now, outside the ephemeral range, not returned before by this
    process."""
    ranges = candidate_ranges()
    if not ranges:  # the whole space is ephemeral: the kernel's pick is all there is
        return _kernel_port(host)
    weights = [len(r) for r in ranges]
    for _ in range(200):
        port = random.choice(random.choices(ranges, weights)[0])
        with _lock:
            if port in _handed_out:
                continue
            if _bindable(host, port):
                _handed_out.add(port)
                return port
    return _kernel_port(host)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
