"""The load generator's two shapes against a stand-in server of known speed.

A single-threaded HTTP server answers each recall after ``SERVICE_S``: its capacity is
1 / SERVICE_S recalls a second, so what the generator reports can be checked against
queueing arithmetic rather than against this machine's speed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from bench import loadgen

SERVICE_S = 0.02  # 50 recalls a second at most


class _Slow(BaseHTTPRequestHandler):
    # HTTP/1.0: one request a connection, as gunicorn's sync workers answer.
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(SERVICE_S)
        body = json.dumps({"items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    srv = HTTPServer(("127.0.0.1", 0), _Slow)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _spec(srv: HTTPServer, **extra: object) -> dict[str, object]:
    return {
        "host": "127.0.0.1",
        "port": srv.server_address[1],
        "clients": 4,
        "seconds": 1.5,
        "jobs": [["mnemo_x_y", f"question {i}"] for i in range(10)],
        **extra,
    }


def test_a_paced_run_under_capacity_serves_the_offered_rate(server: HTTPServer):
    out = loadgen.run(_spec(server, rate=20))
    assert out["offered_rps"] == 20 and out["errors"] == 0
    # 30 recalls were due in 1.5 s; the server had time for each.
    assert 27 <= out["ok"] <= 30 and out["due_not_sent"] <= 1
    assert out["latency_ms"]["p50"] < 10 * SERVICE_S * 1000


def test_a_paced_run_over_capacity_counts_the_wait_from_when_a_recall_was_due(
    server: HTTPServer,
):
    out = loadgen.run(_spec(server, rate=200))
    # The server serves ~50 a second; the backlog grows for the whole run, and the
    # latency from the due time grows with it, far past the time spent being served.
    assert out["throughput_rps"] < 70
    # And the recalls still queued at the end are reported, not dropped silently.
    assert out["due_not_sent"] > 100
    assert out["latency_ms"]["p95"] > 3 * out["service_ms"]["p95"]


def test_a_closed_loop_run_measures_from_sending(server: HTTPServer):
    out = loadgen.run(_spec(server))
    assert out["offered_rps"] is None and out["errors"] == 0
    # Four clients queue at one server: latency ~ 4 x service time (Little's law).
    assert out["latency_ms"] == out["service_ms"]
    assert out["latency_ms"]["p50"] > 2 * SERVICE_S * 1000


def test_the_rate_is_checked():
    with pytest.raises(SystemExit):
        loadgen.run(
            {
                "host": "127.0.0.1",
                "port": 1,
                "clients": 1,
                "seconds": 1,
                "jobs": [],
                "rate": -1,
            }
        )
