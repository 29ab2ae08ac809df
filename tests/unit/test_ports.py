"""``shared/ports.py``: ports for child processes come from outside the kernel's ephemeral range (where an
outgoing connection can take a port between our pick and the child's bind: CI saw the api die with "address
already in use" on 37091), and one is never handed out twice."""

from __future__ import annotations

import socket

from shared.ports import LOWEST, ephemeral_range, free_port


def test_ports_are_outside_the_ephemeral_range_distinct_and_free() -> None:
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(64)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        assert port >= LOWEST and not low <= port <= high, port
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing holds it
