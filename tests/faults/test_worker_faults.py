"""Broker and worker faults: Redis stopped during writes, a worker SIGKILLed mid-batch.

The stack runs its own embedded PostgreSQL, web process, ``redis-server`` on a free
port (never the shared 6379) and ``celery worker`` processes (tests/faults/stack.py).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import numpy as np
import pytest

from config.celery import solo_worker_argv
from tests.faults.stack import BASE, Stack, free_port

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.celery_worker]


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture(scope="module")
def redis() -> Iterator[Redis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    r = Redis()
    r.start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def stack(redis: Redis) -> Iterator[Stack]:
    """One stack for the module (setting one up costs ~20 s); each test leaves it up."""
    s = Stack()
    s.env["CELERY_BROKER_URL"] = f"redis://127.0.0.1:{redis.port}/0"
    s.env["MNEMO_CONSOLIDATION_ENABLED"] = "0"  # embedding is what is under test
    s.env["MNEMO_EMBEDDING_BATCH"] = "16"
    workers: list[subprocess.Popen[bytes]] = []
    s.workers = workers  # type: ignore[attr-defined]
    s.start_worker = lambda: (
        workers.append(
            subprocess.Popen(  # type: ignore[attr-defined]
                solo_worker_argv(),
                cwd=BASE,
                env=s.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        or workers[-1]
    )
    try:
        s.setup()
        s.start_web()
        yield s
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(timeout=10)
        s.close()


def _write(stack: Stack, session: int, prefix: str, n: int) -> list[int]:
    status, body = stack.call(
        "POST",
        f"/api/v1/sessions/{session}/messages",
        {
            "messages": [
                {"content": f"{prefix} note {i} about the garden"} for i in range(n)
            ]
        },
        timeout=30,
    )
    assert status == 201, body
    return [item["id"] for item in body["items"]]


def _states(stack: Stack, ids: list[int]) -> dict[str, int]:
    rows = stack.psql(
        "SELECT embedding_state, count(*) FROM memory_memory WHERE id IN "
        f"({','.join(map(str, ids))}) GROUP BY 1"
    )
    return dict(rows)


def _wait_ready(stack: Stack, ids: list[int], seconds: float = 120) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _states(stack, ids).get("ready", 0) == len(ids):
            break
        time.sleep(0.5)
    return _states(stack, ids).get("ready", 0)


def test_writes_succeed_while_redis_is_down_and_the_sweep_embeds_them_after(
    stack: Stack, redis: Redis
) -> None:
    stack.start_worker()  # type: ignore[attr-defined]
    session = stack.call("POST", "/api/v1/sessions", {"external_id": "redis"})[1]["id"]
    before = _write(stack, session, "before", 5)
    assert _wait_ready(stack, before) == 5
    redis.stop()
    started = time.monotonic()
    during = _write(stack, session, "during", 8)
    assert time.monotonic() - started < 15, "a dead broker must not stall writes"
    assert _states(stack, during) == {"pending": 8}
    redis.start()
    stack.manage("sweep_pending", "--older-than", "0")
    assert _wait_ready(stack, during) == 8
    total = stack.psql(
        "SELECT count(*) FROM memory_memory WHERE content LIKE 'during%'"
    )
    assert total == [(8,)]  # count before = count after: nothing lost or duplicated


def test_a_worker_killed_mid_batch_loses_nothing_and_embeds_consistently(
    stack: Stack,
) -> None:
    for old in stack.workers:  # type: ignore[attr-defined]
        old.kill()  # exactly one worker runs the batch below
        old.wait(timeout=10)
    session = stack.call("POST", "/api/v1/sessions", {"external_id": "kill"})[1]["id"]
    worker = stack.start_worker()  # type: ignore[attr-defined]
    ids = _write(stack, session, "batch", 96)
    deadline = time.monotonic() + 120
    while _states(stack, ids).get("ready", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    partial = _states(stack, ids).get("ready", 0)
    assert partial > 0, "the worker never started"
    stack.start_worker()  # type: ignore[attr-defined]
    stack.manage("sweep_pending", "--older-than", "0")
    assert _wait_ready(stack, ids) == 96
    assert stack.psql(
        "SELECT count(*) FROM memory_memory WHERE content LIKE 'batch note%'"
    ) == [(96,)]
    # Rows embedded by either worker hold what a fresh embedding gives (up to float
    # rounding: bf16 arithmetic, where the CPU has AMX, rounds by batch shape).
    from memory import embeddings
    from memory.models import Memory
    from memory.services import embedding_text

    rows = stack.psql(
        "SELECT id, content, speaker, context, embedding::text FROM memory_memory "
        f"WHERE id IN ({ids[0]}, {ids[len(ids) // 2]}, {ids[-1]}) ORDER BY id"
    )
    fresh = embeddings.embed_texts(
        [
            embedding_text(Memory(content=c, speaker=s, context=x))
            for _, c, s, x, _ in rows
        ]
    )
    for (_, _, _, _, stored), vector in zip(rows, fresh, strict=True):
        stored_vec = np.array([float(v) for v in stored.strip("[]").split(",")])
        assert float(stored_vec @ np.array(vector)) > 0.9999


def test_an_org_outgrowing_the_line_gets_its_indexes_before_the_beat(
    stack: Stack,
) -> None:
    """A real worker and broker: the embedding task that takes an org past
    MNEMO_TENANT_HNSW_MIN_ROWS enqueues the index sync, and the worker builds the
    org's own HNSW and GIN indexes (no beat runs here)."""
    for old in stack.workers:  # type: ignore[attr-defined]
        old.kill()
        old.wait(timeout=10)
    counts = stack.psql(
        "SELECT org_id, count(*) FROM memory_memory WHERE embedding IS NOT NULL "
        "GROUP BY 1"
    )
    have = max((int(n) for _, n in counts), default=0)
    line = int(have) + 10
    worker = subprocess.Popen(
        solo_worker_argv(),
        cwd=BASE,
        env={**stack.env, "MNEMO_TENANT_HNSW_MIN_ROWS": str(line)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stack.workers.append(worker)  # type: ignore[attr-defined]
    session = stack.call("POST", "/api/v1/sessions", {"external_id": "grow"})[1]["id"]
    ids = _write(stack, session, "grow", 15)
    assert _wait_ready(stack, ids) == 15
    (org,) = {
        row[0]
        for row in stack.psql(
            f"SELECT org_id FROM memory_memory WHERE id IN ({','.join(map(str, ids))})"
        )
    }
    names = (f"memory_hnsw_org_{org}", f"memory_gin_org_{org}")
    query = (
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        f"WHERE i.indisvalid AND c.relname IN ('{names[0]}', '{names[1]}')"
    )
    deadline = time.monotonic() + 120
    while len(stack.psql(query)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sorted(r[0] for r in stack.psql(query)) == sorted(names)
