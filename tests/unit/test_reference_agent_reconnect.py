"""The reference agent rides out a gateway restart (refused connections) but fails fast on HTTP errors."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from services.runner.harnesses.reference_agent import ApiError, chat
from tests.fixtures.services import free_port

pytestmark = pytest.mark.unit


class _Handler(BaseHTTPRequestHandler):
    status = 200

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def test_refused_connection_is_retried_until_the_gateway_is_back() -> None:
    port = free_port()
    servers: list[HTTPServer] = []

    def start_later() -> None:
        time.sleep(1.0)
        server = HTTPServer(("127.0.0.1", port), _Handler)
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=start_later, daemon=True).start()
    started = time.monotonic()
    reply = chat(f"http://127.0.0.1:{port}/v1", "k", {"messages": []}, timeout_s=10, reconnect_s=20)
    assert reply["choices"][0]["message"]["content"] == "ok"
    assert time.monotonic() - started >= 1.0
    servers[0].shutdown()


def test_http_errors_and_exhausted_reconnects_fail_fast() -> None:
    port = free_port()
    with pytest.raises(ApiError, match="Connection refused"):
        chat(f"http://127.0.0.1:{port}/v1", "k", {}, timeout_s=5, reconnect_s=1)

    class Unavailable(_Handler):
        status = 503

    server = HTTPServer(("127.0.0.1", port), Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(ApiError, match="HTTP 503"):
        chat(f"http://127.0.0.1:{port}/v1", "k", {}, timeout_s=5, reconnect_s=30)
    assert time.monotonic() - started < 5
    server.shutdown()
