"""Sustained load from a second process: ``python -m bench.loadgen SPEC.json``.

Bounded: ``clients`` threads, each with its own kept-alive loopback connection, issue
recalls until ``seconds`` have passed; prints one JSON line with the throughput,
latency percentiles and every error. No Django import: this process only speaks HTTP,
like a real client would.

Two shapes. Without ``rate`` (closed loop) each client sends its next recall as soon
as the last one returns: the throughput is the server's capacity, and the latency is
mostly queueing (with 20 clients the mean is 20 / throughput by Little's law). With
``rate`` (recalls a second, all clients together) the clients keep a fixed schedule,
recall ``j`` of client ``n`` at ``(n + j * clients) / rate`` seconds: the latency of
each recall counts from when it was due, not from when it was sent, so a server that
falls behind is charged for the wait it caused (no coordinated omission, as wrk2
measures); ``service_ms`` is from sending to the answer.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from typing import Any

from bench.stats import JsonClient, percentiles


def run(spec: dict[str, Any]) -> dict[str, Any]:
    host, port = spec["host"], int(spec["port"])
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("loadgen only targets loopback")
    seconds = min(float(spec["seconds"]), 600.0)
    jobs: list[tuple[str, str]] = [tuple(j) for j in spec["jobs"]]  # (key, query)
    rate = float(spec["rate"]) if spec.get("rate") else None
    if rate is not None and not 0 < rate <= 10_000:
        raise SystemExit("rate must be in (0, 10000] recalls a second")
    n_clients = int(spec["clients"])
    latencies: list[float] = []
    service: list[float] = []
    errors: list[str] = []
    unsent = [0] * n_clients
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + seconds

    def client(n: int) -> None:
        i, j = n, 0
        clients: dict[str, JsonClient] = {}
        while time.perf_counter() < deadline:
            key, query = jobs[i % len(jobs)]
            i += n_clients
            c = clients.setdefault(key, JsonClient(host, port, key))
            due = None
            if rate is not None:
                due = start + (n + j * n_clients) / rate
                j += 1
                if due >= deadline:
                    break
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            t0 = time.perf_counter()
            try:
                status, body = c.post(
                    "/api/v1/recall",
                    {"query": query, "mode": spec.get("mode", "cascade")},
                    # The load generator shares the server's 2 cores: it reads each
                    # answer whole but parses only errors (session 29).
                    parse=False,
                )
                ok = status == 200
                err = None if ok else f"{status}: {str(body)[:120]}"
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none hidden
                err = f"{type(exc).__name__}: {exc}"
            t1 = time.perf_counter()
            ms = (t1 - (due if due is not None else t0)) * 1000
            with lock:
                if err is None:
                    latencies.append(ms)
                    service.append((t1 - t0) * 1000)
                else:
                    errors.append(err)
        if rate is not None:
            # Recalls that fell due before the end but were never sent (the client
            # was still waiting on earlier ones): a backlog the latencies omit.
            due_total = max(0, math.ceil(((deadline - start) * rate - n) / n_clients))
            unsent[n] = max(0, due_total - j)
        for c in clients.values():
            c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    elapsed = time.perf_counter() - start
    return {
        "clients": n_clients,
        "offered_rps": rate,
        "seconds": round(elapsed, 2),
        "requests": len(latencies) + len(errors),
        "ok": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:5],
        "due_not_sent": sum(unsent) if rate is not None else None,
        "throughput_rps": round(len(latencies) / elapsed, 2),
        "latency_ms": percentiles(latencies),
        "service_ms": percentiles(service),
    }


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(run(json.load(f))))
