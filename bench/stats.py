"""Small measurement helpers: percentiles, peak RSS, HTTP over one kept-alive socket."""

from __future__ import annotations

import http.client
import json
import math
from typing import Any


def percentiles(values: list[float]) -> dict[str, float]:
    """p50 / p95 / p99 / mean / max (nearest-rank), rounded to 0.01."""
    if not values:
        return {"n": 0}
    s = sorted(values)

    def rank(p: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]

    return {
        "n": len(s),
        "p50": round(rank(50), 2),
        "p95": round(rank(95), 2),
        "p99": round(rank(99), 2),
        "mean": round(sum(s) / len(s), 2),
        "max": round(s[-1], 2),
    }


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident set size (VmHWM) of a live process, in MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class JsonClient:
    """A JSON-over-HTTP client on one persistent loopback connection."""

    def __init__(self, host: str, port: int, key: str, timeout: float = 30.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
        }
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)

    def post(
        self, path: str, body: dict[str, Any], *, parse: bool = True
    ) -> tuple[int, dict[str, Any]]:
        """(status, parsed body); ``parse=False``: a 2xx body is read, not parsed."""
        data = json.dumps(body).encode()
        try:
            self.conn.request("POST", path, body=data, headers=self.headers)
            resp = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            # The server closed an idle keep-alive socket: reconnect once.
            self.conn.close()
            self.conn = http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout
            )
            self.conn.request("POST", path, body=data, headers=self.headers)
            resp = self.conn.getresponse()
        raw = resp.read()
        if not parse and 200 <= resp.status < 300:
            return resp.status, {}
        try:
            return resp.status, json.loads(raw) if raw else {}
        except ValueError:
            return resp.status, {"raw": raw[:200].decode(errors="replace")}

    def close(self) -> None:
        self.conn.close()
