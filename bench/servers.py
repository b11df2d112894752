"""Start the real web (gunicorn) and worker (celery) processes for a benchmark run.

Both bind to loopback only, share the benchmark database (``MNEMO_DATA_DIR`` and
``MNEMO_DB_NAME`` of this process), and are stopped by pid when the block ends.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection

from bench.stats import peak_rss_mb
from config.celery import solo_worker_argv


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def pids(self) -> list[int]:
        """The process and its direct children (gunicorn workers, celery pool)."""
        pid = self.popen.pid
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        return [pid, *[int(k) for k in kids]]

    def peak_rss_mb(self) -> float:
        """Largest peak RSS among the process and its children."""
        return max((peak_rss_mb(p) or 0.0) for p in self.pids())


@dataclass
class Servers:
    host: str
    port: int
    procs: dict[str, Proc] = field(default_factory=dict)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time so far of each server (with its workers) and of PostgreSQL (the
        embedded server's processes; absent on an external server)."""
        out = {name: cpu_seconds(p.popen.pid) for name, p in self.procs.items()}
        pg = postgres_pid()
        if pg is not None:
            out["postgres"] = cpu_seconds(pg)
        return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, its live descendants and the children it has
    reaped (PostgreSQL's exited backends, gunicorn's replaced workers)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        t = proc.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        kids = proc.children(recursive=True)
    except psutil.Error:
        return 0.0
    for kid in kids:
        with contextlib.suppress(psutil.Error):
            k = kid.cpu_times()
            total += k.user + k.system
    return total


def postgres_pid() -> int | None:
    """The embedded PostgreSQL's postmaster (``postmaster.pid`` in its data folder)."""
    data_dir = connection.settings_dict.get("MNEMO_EMBEDDED_DIR")
    if not data_dir:
        return None
    try:
        return int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(broker: str | None) -> dict[str, str]:
    db = connection.settings_dict
    env = {**os.environ, "MNEMO_LOG_LEVEL": "WARNING", "MNEMO_DB_NAME": db["NAME"]}
    if db.get("MNEMO_EMBEDDED_DIR"):
        env["MNEMO_DATA_DIR"] = str(db["MNEMO_EMBEDDED_DIR"])
        env["MNEMO_EMBEDDED_CLEANUP"] = "stop"
    if broker:
        env["CELERY_BROKER_URL"] = broker
    else:
        env.pop("CELERY_BROKER_URL", None)
    return env


def _wait_http(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(
        f"web server on {host}:{port} did not answer /healthz in {timeout}s"
    )


@contextlib.contextmanager
def running(
    *,
    web_workers: int = 2,
    broker: str | None = None,
    worker: bool = False,
    log_dir: Path,
) -> Iterator[Servers]:
    """gunicorn (and a celery worker when ``worker``) until the block exits."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = child_env(broker)
    host, port = "127.0.0.1", free_port()
    servers = Servers(host, port)
    base = Path(settings.BASE_DIR)
    cmds = {
        "web": [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "-w",
            str(web_workers),
            "-b",
            f"{host}:{port}",
            "--timeout",
            "180",
            "--preload",
        ]
    }
    if worker:
        cmds["worker"] = solo_worker_argv()
    try:
        for name, cmd in cmds.items():
            log = log_dir / f"{name}.log"
            with open(log, "wb") as out:
                popen = subprocess.Popen(  # noqa: S603 - fixed argv, loopback only
                    cmd, cwd=base, env=env, stdout=out, stderr=subprocess.STDOUT
                )
            servers.procs[name] = Proc(name, popen, log)
        _wait_http(host, port, timeout=120)
        yield servers
    finally:
        for proc in servers.procs.values():
            proc.popen.terminate()
        for proc in servers.procs.values():
            try:
                proc.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout=10)
