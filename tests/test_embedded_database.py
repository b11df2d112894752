"""The embedded PostgreSQL: start, restart with data kept, clear errors for bad dirs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config import database


@pytest.fixture
def data_dir():
    base = Path(settings.BASE_DIR) / "var"
    base.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="embedded-test-", dir=base) as tmp:
        yield Path(tmp) / "pg"


def test_the_server_starts_keeps_data_across_a_restart_and_has_pgvector(data_dir):
    host = database.ensure_server(data_dir)
    database.ensure_database(host, "probe")
    with psycopg.connect(
        host=host, user="postgres", dbname="probe", autocommit=True
    ) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE TABLE kept (v vector(3))")
        c.execute("INSERT INTO kept VALUES ('[1,2,3]')")
    database.stop_server(data_dir)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host=host, user="postgres", dbname="probe", connect_timeout=2)
    host = database.ensure_server(data_dir)
    with psycopg.connect(host=host, user="postgres", dbname="probe") as c:
        assert c.execute("SELECT v::text FROM kept").fetchone() == ("[1,2,3]",)
    database.stop_server(data_dir)


def test_a_file_in_place_of_the_data_folder_is_a_clear_error(data_dir):
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    data_dir.write_text("not a folder")
    with pytest.raises(ImproperlyConfigured, match="is not a folder"):
        database.ensure_server(data_dir)


def test_a_non_empty_foreign_folder_is_a_clear_error(data_dir):
    data_dir.mkdir(parents=True)
    (data_dir / "holiday.jpg").write_text("x")
    with pytest.raises(ImproperlyConfigured, match="not a PostgreSQL data folder"):
        database.ensure_server(data_dir)


def _shared_buffers(host: str) -> str:
    with psycopg.connect(host=host, user="postgres", dbname="postgres") as c:
        return str(c.execute("SHOW shared_buffers").fetchone()[0])


def test_shared_buffers_follow_the_setting_across_restarts(data_dir, monkeypatch):
    monkeypatch.setenv("MNEMO_PG_SHARED_BUFFERS", "256MB")
    host = database.ensure_server(data_dir)
    assert _shared_buffers(host) == "256MB"
    database.ensure_database(host, "probe")
    with psycopg.connect(
        host=host, user="postgres", dbname="probe", autocommit=True
    ) as c:
        c.execute("CREATE TABLE kept (n int)")
        c.execute("INSERT INTO kept VALUES (7)")
    database.stop_server(data_dir)
    # A changed setting applies at the next start (this process is its only user).
    monkeypatch.setenv("MNEMO_PG_SHARED_BUFFERS", "384MB")
    host = database.ensure_server(data_dir)
    assert _shared_buffers(host) == "384MB"
    with psycopg.connect(host=host, user="postgres", dbname="probe") as c:
        assert c.execute("SELECT n FROM kept").fetchone() == (7,)
    database.stop_server(data_dir)


def test_shared_buffers_sizes_and_bad_values():
    auto = database.shared_buffers_mb("auto")
    assert database.SHARED_BUFFERS_MIN_MB <= auto <= database.SHARED_BUFFERS_MAX_MB
    assert database.shared_buffers_mb("1GB") == 1024
    assert database.shared_buffers_mb(" 512 mb ") == 512
    assert database.shared_buffers_mb("300") == 300
    with pytest.raises(ImproperlyConfigured, match="under 128MB"):
        database.shared_buffers_mb("64MB")
    with pytest.raises(ImproperlyConfigured, match="use 'auto' or a size"):
        database.shared_buffers_mb("lots")


def test_a_server_another_process_uses_is_not_restarted(data_dir, monkeypatch):
    """The new size waits for the next start while another process holds the server."""
    import subprocess
    import sys

    monkeypatch.setenv("MNEMO_PG_SHARED_BUFFERS", "256MB")
    host = database.ensure_server(data_dir)
    other = subprocess.Popen(  # noqa: S603 - this interpreter, a fixed script
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from config import database; "
            "database.ensure_server(Path(sys.argv[1])); print('attached', flush=True); "
            "sys.stdin.read(); database.stop_server(Path(sys.argv[1]))",
            str(data_dir),
        ],
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout.readline().strip() == "attached"
        monkeypatch.setenv("MNEMO_PG_SHARED_BUFFERS", "384MB")
        # What ensure_server does at a start: the other process holds the server too.
        assert database._set_shared_buffers(host) is True
        server = database._servers[data_dir.resolve()]
        assert database._restart_if_sole_user(server, data_dir.resolve()) is False
        assert _shared_buffers(host) == "256MB"
        with psycopg.connect(host=host, user="postgres", dbname="postgres") as c:
            pending = c.execute(
                "SELECT pending_restart FROM pg_settings WHERE name = 'shared_buffers'"
            ).fetchone()[0]
        assert pending is True
    finally:
        other.communicate("", timeout=60)
    assert other.returncode == 0
    database.stop_server(data_dir)  # the last user: the server stops
    host = database.ensure_server(data_dir)
    assert _shared_buffers(host) == "384MB"
    database.stop_server(data_dir)
