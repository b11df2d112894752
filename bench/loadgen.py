"""Sustained load from a second process: ``python -m bench.loadgen SPEC.json``.

Bounded: ``clients`` threads, each with its own kept-alive loopback connection, issue
recalls back to back until ``seconds`` have passed; prints one JSON line with the
throughput, latency percentiles and every error. No Django import: this process only
speaks HTTP, like a real client would.
"""

from __future__ import annotations

import json
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
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        i = n
        clients: dict[str, JsonClient] = {}
        while time.monotonic() < deadline:
            key, query = jobs[i % len(jobs)]
            i += spec["clients"]
            c = clients.setdefault(key, JsonClient(host, port, key))
            t0 = time.perf_counter()
            try:
                status, body = c.post(
                    "/api/v1/recall",
                    {"query": query, "mode": spec.get("mode", "cascade")},
                )
                ok = status == 200
                err = None if ok else f"{status}: {str(body)[:120]}"
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none hidden
                err = f"{type(exc).__name__}: {exc}"
            ms = (time.perf_counter() - t0) * 1000
            with lock:
                if err is None:
                    latencies.append(ms)
                else:
                    errors.append(err)
        for c in clients.values():
            c.close()

    threads = [
        threading.Thread(target=client, args=(n,)) for n in range(spec["clients"])
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    elapsed = time.perf_counter() - started
    return {
        "clients": spec["clients"],
        "seconds": round(elapsed, 2),
        "requests": len(latencies) + len(errors),
        "ok": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:5],
        "throughput_rps": round(len(latencies) / elapsed, 2),
        "latency_ms": percentiles(latencies),
    }


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(run(json.load(f))))
