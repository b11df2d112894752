"""PostgreSQL faults under a live web process: restart, SIGKILL mid-burst, backup drill.

Each test runs its own embedded PostgreSQL and ``runserver`` (tests/faults/stack.py);
the suite's database and the shared Redis are never touched.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults.stack import Stack, free_port

pytestmark = [pytest.mark.slow, pytest.mark.faults]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """One stack for the module (setting one up costs ~20 s); each test leaves it up."""
    s = Stack()
    s.env["MNEMO_EMBEDDING_ENABLED"] = "0"  # these faults are about rows, not vectors
    try:
        s.setup()
        s.start_web()
        yield s
    finally:
        s.close()


def _wait_status(stack: Stack, path: str, want: int, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    status = 0
    while time.monotonic() < deadline:
        try:
            status = stack.call("GET", path, timeout=5)[0]
        except OSError:
            status = 0
        if status == want:
            return status
        time.sleep(0.3)
    return status


def test_a_restarted_database_gives_503_then_service_resumes_without_an_app_restart(
    stack: Stack,
) -> None:
    status, session = stack.call("POST", "/api/v1/sessions", {"external_id": "before"})
    assert status == 201
    web_pid = stack.web.pid  # type: ignore[union-attr]
    stack.stop_db()
    status, body = stack.call("GET", "/api/v1/sessions", timeout=15)
    assert status == 503 and "unavailable" in body["error"]
    assert stack.call("POST", "/api/v1/sessions", {"external_id": "down"})[0] == 503
    stack.start_db()
    assert _wait_status(stack, "/api/v1/sessions", 200, 20) == 200
    status, _ = stack.call(
        "POST",
        f"/api/v1/sessions/{session['id']}/messages",
        {"messages": [{"content": "written after the restart"}]},
    )
    assert status == 201
    assert stack.web.poll() is None and stack.web.pid == web_pid  # type: ignore[union-attr]


def test_every_acknowledged_write_survives_a_sigkill_of_postgres(stack: Stack) -> None:
    status, session = stack.call("POST", "/api/v1/sessions", {"external_id": "burst"})
    assert status == 201
    acked: dict[str, str] = {}  # external_ref -> sha256 the API reported
    sent: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            batch = f"w{n}-{i}"
            items = [
                {"content": f"burst {batch} item {j}", "external_ref": f"{batch}:{j}"}
                for j in range(3)
            ]
            with lock:
                sent.append(batch)
            try:
                code, body = stack.call(
                    "POST",
                    f"/api/v1/sessions/{session['id']}/messages",
                    {"messages": items},
                    timeout=10,
                )
            except OSError:
                code, body = 0, None
            if code == 201:
                with lock:
                    for item in body["items"]:
                        acked[item["external_ref"]] = item["content_sha256"]
            i += 1

    # Daemon threads, always stopped: if the kill fails, the writers must not keep
    # the test process alive (it once spun at full CPU after a failed run).
    threads = [
        threading.Thread(target=writer, args=(n,), daemon=True) for n in range(6)
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(1.5)
        stack.kill_db()
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    stack.start_db()
    assert len(acked) >= 9, "the burst wrote too little before the kill"
    rows = {
        ref: (content, sha)
        for ref, content, sha in stack.psql(
            "SELECT external_ref, content, content_sha256 FROM memory_memory "
            "WHERE external_ref LIKE 'w%'"
        )
    }
    for ref, sha in acked.items():
        assert ref in rows, f"acknowledged write {ref} was lost"
        content, stored = rows[ref]
        assert stored == sha == hashlib.sha256(content.encode()).hexdigest()
    for batch in sent:  # a batch is one transaction: all of it or none of it
        present = sum(1 for j in range(3) if f"{batch}:{j}" in rows)
        assert present in (0, 3), f"batch {batch} was half-written"


def test_backup_and_restore_drill_keeps_rows_checksums_and_recall(
    stack: Stack,
) -> None:
    facts = [
        f"Project {name} ships in {month}"
        for name, month in zip(
            ["Atlas", "Borealis", "Cygnus", "Draco", "Eridanus", "Fornax"],
            ["May", "June", "July", "March", "April", "May"],
            strict=True,
        )
    ]
    status, _ = stack.call(
        "POST",
        "/api/v1/memories",
        {
            "memories": [
                {"content": f, "tier": "semantic", "kind": "fact"} for f in facts
            ]
        },
    )
    assert status == 201
    queries = ["When does Atlas ship?", "What ships in May?", "Draco"]

    def recall_ids(s: Stack) -> list[list[int]]:
        out = []
        for q in queries:
            code, body = s.call(
                "POST", "/api/v1/recall", {"query": q, "limit": 5}, timeout=120
            )
            assert code == 200, body
            out.append([item["id"] for item in body["items"]])
        return out

    before = recall_ids(stack)
    assert any(before)
    checksum = (
        "SELECT count(*), md5(string_agg(id || ':' || content_sha256 || ':' || status, "
        "',' ORDER BY id)) FROM memory_memory"
    )
    tables = [
        "memory_session",
        "memory_memory",
        "memory_entity",
        "memory_mention",
        "recall_recallevent",
        "accounts_apikey",
        "accounts_organization",
    ]
    counts = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)
    expected = (stack.psql(checksum), stack.psql(counts))
    dump = stack.data_dir.parent / f"{stack.data_dir.name}.dump"
    try:
        common = ["-h", stack.socket_dir, "-U", "postgres"]
        stack.pg_tool("pg_dump", *common, "-Fc", "-f", str(dump), stack.db_name)
        stack.psql("CREATE DATABASE mnemo_restored", db="postgres")
        stack.pg_tool("pg_restore", *common, "-d", "mnemo_restored", str(dump))
    finally:
        dump.unlink(missing_ok=True)
    assert (
        stack.psql(checksum, db="mnemo_restored"),
        stack.psql(counts, db="mnemo_restored"),
    ) == expected
    restored = Stack.__new__(Stack)
    restored.__dict__.update(stack.__dict__)
    restored.db_name = "mnemo_restored"
    restored.env = {**stack.env, "MNEMO_DB_NAME": "mnemo_restored"}
    # A port of its own: the neighbour of the first stack's may be taken (it was
    # once, and this drill failed with 60 s of refused connections).
    restored.port = free_port()
    restored.web = None
    restored.start_web()
    try:
        assert recall_ids(restored) == before
    finally:
        restored.web.terminate()  # type: ignore[union-attr]
        restored.web.wait(timeout=20)  # type: ignore[union-attr]
