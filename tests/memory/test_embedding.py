"""Embedding pipeline: eager path, failures, the sweep, real Celery worker on Redis."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import redis
from django.conf import settings as dj_settings
from django.db import connection

from config import celery_app
from config.celery import solo_worker_argv
from memory import embeddings, services
from memory.models import EmbeddingState, Memory
from memory.services import MemoryInput

REDIS_URL = os.environ.get("MNEMO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def test_the_bundled_model_embeds_offline_into_384_unit_vectors():
    vectors = embeddings.embed_texts(["Caroline went to a support group", "hello"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similar = embeddings.embed_texts(
        ["a dog runs in the park", "a puppy plays outside", "quarterly tax filing"]
    )
    assert similar[0] @ similar[1] > similar[0] @ similar[2]


def test_texts_are_embedded_in_batches_of_similar_length_in_their_own_order():
    short = [f"note {i} about the garden" for i in range(5)]
    long = "the quarterly review covered budget, hiring and the roadmap. " * 40
    texts = [short[0], long, *short[1:]]
    buckets = embeddings.length_buckets(texts, 3)
    assert buckets == [[0, 2, 3], [4, 5], [1]]  # the long text is padded alone
    together = embeddings.embed_texts(texts)
    alone = np.vstack([embeddings.embed_texts([t]) for t in texts])
    # equal up to float rounding (bf16 arithmetic, where used, rounds by batch shape)
    assert (together * alone).sum(axis=1).min() > 0.9999


@pytest.mark.parametrize(
    ("content", "speaker", "want"),
    [
        ("I went to Paris", "Caroline", "Caroline: I went to Paris"),
        # An observation of an unnamed speaker already starts with the name.
        ("Caroline: went to Paris", "Caroline", "Caroline: went to Paris"),
        ("Carol: hi", "Caroline", "Caroline: Carol: hi"),  # another name is content
        ("went to Paris", "", "went to Paris"),
    ],
)
def test_the_embedded_text_names_the_speaker_once(content, speaker, want):
    memory = Memory(content=content, speaker=speaker)
    assert services.embedding_text(memory) == want


@pytest.mark.django_db
def test_rows_are_pending_at_write_and_ready_after_commit(
    world, django_capture_on_commit_callbacks
):
    principal = world.principal("agent_a")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = services.memory_remember(
            principal=principal, items=[MemoryInput(content="Mia adopted a cat")]
        )
    row = Memory.objects.get(pk=result.memories[0].pk)
    assert row.embedding_state == EmbeddingState.PENDING and row.embedding is None
    assert result.pending == 1
    for callback in callbacks:
        callback()
    row.refresh_from_db()
    assert row.embedding_state == EmbeddingState.READY
    assert len(row.embedding) == 384


@pytest.mark.django_db
def test_an_embedding_failure_marks_rows_failed_and_the_sweep_recovers_them(
    world, settings, django_capture_on_commit_callbacks
):
    principal = world.principal("agent_a")
    settings.MNEMO_EMBEDDING_ENABLED = False
    with django_capture_on_commit_callbacks(execute=True):
        ids = [
            m.pk
            for m in services.memory_remember(
                principal=principal, items=[MemoryInput(content="sweep me")]
            ).memories
        ]
    row = Memory.objects.get(pk=ids[0])
    assert row.embedding_state == EmbeddingState.FAILED
    assert "disabled" in row.embedding_error and row.embedding_attempts == 1
    settings.MNEMO_EMBEDDING_ENABLED = True
    with django_capture_on_commit_callbacks(execute=True):
        assert services.sweep_pending(older_than_seconds=0) == 1
    row.refresh_from_db()
    assert row.embedding_state == EmbeddingState.READY and row.embedding_error == ""


@pytest.mark.django_db
def test_the_sweep_leaves_fresh_pending_rows_alone(world):
    services.memory_remember(
        principal=world.principal("agent_a"),
        items=[MemoryInput(content="fresh")],
        enqueue=False,
    )
    assert services.sweep_pending(older_than_seconds=3600) == 0


def _pending_of(principal, *texts):
    """Rows written without enqueueing their embedding: pending until a task runs."""
    return [
        m.pk
        for m in services.memory_remember(
            principal=principal,
            items=[MemoryInput(content=t) for t in texts],
            enqueue=False,
        ).memories
    ]


@pytest.mark.django_db
def test_an_embedding_task_takes_its_org_s_backlog_along_but_no_other_org_s(
    world, settings
):
    from memory.tasks import embed_memories

    backlog = _pending_of(world.principal("agent_a"), "one", "two", "three", "four")
    other_org = _pending_of(world.principal("carol"), "globex backlog")
    settings.MNEMO_EMBEDDING_TASK_ROWS = 3
    settings.MNEMO_EMBEDDING_TASK_MAX_ROWS = 3  # no refill: the first take only
    assert embed_memories.apply(args=[[backlog[-1]]]).get() == 3
    states = dict(
        Memory.objects.filter(pk__in=backlog).values_list("id", "embedding_state")
    )
    # the task's own row first, then the oldest of the backlog, up to the task's rows
    assert [states[i] for i in backlog] == ["ready", "ready", "pending", "ready"]
    assert Memory.objects.get(pk=other_org[0]).embedding_state == "pending"
    # a later task whose row a batch already took is a no-op: it takes no backlog
    # ("three" has a task of its own in a real write, or the sweep gives it one)
    assert embed_memories.apply(args=[[backlog[0]]]).get() == 0
    assert Memory.objects.get(pk=backlog[2]).embedding_state == "pending"
    assert embed_memories.apply(args=[[backlog[2]]]).get() == 1


@pytest.mark.django_db
def test_a_running_task_keeps_taking_its_org_s_new_rows_up_to_its_limit(
    world, settings, monkeypatch
):
    """Rows written while a task runs are embedded by it, in chunks while the one
    before is stored, not left to a task queued behind the no-op tasks."""
    from memory.tasks import embed_memories

    agent = world.principal("agent_a")

    first = _pending_of(agent, "one", "two")
    other_org = _pending_of(world.principal("carol"), "globex backlog")
    written: list[int] = []
    real = services.pending_rows

    def rows_arrive(orgs, *, exclude, limit):
        if not written:  # a write lands while the task embeds its first rows
            written.extend(_pending_of(agent, "three", "four", "five", "six", "seven"))
        return real(orgs, exclude=exclude, limit=limit)

    monkeypatch.setattr(services, "pending_rows", rows_arrive)
    settings.MNEMO_EMBEDDING_BATCH = 2
    settings.MNEMO_EMBEDDING_TASK_ROWS = 2
    settings.MNEMO_EMBEDDING_TASK_MAX_ROWS = 6
    assert embed_memories.apply(args=[first]).get() == 6
    states = dict(
        Memory.objects.filter(pk__in=first + written).values_list(
            "id", "embedding_state"
        )
    )
    # oldest first, two at a time, until the task's six rows
    assert [states[i] for i in first + written] == ["ready"] * 6 + ["pending"]
    assert Memory.objects.get(pk=other_org[0]).embedding_state == "pending"
    # the row past the limit goes with its own task
    assert embed_memories.apply(args=[[written[-1]]]).get() == 1


@pytest.mark.django_db
def test_an_embedding_task_runs_as_many_statements_for_many_rows_and_names_as_for_few(
    world,
):
    """No statement per row or per entity: linking 12 rows naming 13 entities costs
    what linking 2 rows naming 3 does (the mention counts go in one UPDATE)."""
    from django.test.utils import CaptureQueriesContext

    from memory.models import Entity
    from memory.tasks import embed_memories

    names = ["Rosa", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta"]
    names += ["Hiro", "Ines", "Jonas", "Kemal", "Lotte"]

    def statements(texts):
        ids = _pending(world, texts)
        with CaptureQueriesContext(connection) as queries:
            assert embed_memories.apply(args=[ids]).get() == len(ids)
        return len(queries)

    few = statements(["We met Rosa and Bruno in Oslo.", "Later Rosa called."])
    many = statements([f"On Monday Rosa met {n} in Oslo." for n in names])
    assert few == many
    # each entity's count is its mentions, whichever task wrote them
    from django.db.models import Count

    entities = Entity.objects.filter(org=world.acme).annotate(n=Count("mentions"))
    counts = {e.name: (e.mention_count, e.n) for e in entities}
    assert all(n in counts for n in names), counts
    assert all(stored == actual for stored, actual in counts.values()), counts
    assert counts["Rosa"][1] >= 12 and counts["Oslo"][1] >= 12


@pytest.mark.django_db
def test_linking_rows_again_adds_no_mention_and_counts_none(world):
    """A span already stored is skipped, and only mentions written are counted (a
    retried chunk links its rows again)."""
    from django.db.models import Count

    from memory import entities
    from memory.models import Entity, Mention
    from memory.tasks import embed_memories

    ids = _pending(world, ["At noon Rosa met Bruno in Oslo.", "We saw Rosa in Oslo."])
    embed_memories.apply(args=[ids]).get()
    before = Mention.objects.filter(memory_id__in=ids).count()
    counted = dict(
        Entity.objects.filter(org=world.acme).values_list("name", "mention_count")
    )
    assert entities.extract_and_link(rows=list(Memory.objects.filter(pk__in=ids))) == 0
    assert Mention.objects.filter(memory_id__in=ids).count() == before > 0
    got = Entity.objects.filter(org=world.acme).annotate(n=Count("mentions"))
    assert {e.name: e.mention_count for e in got} == counted
    assert {e.name: e.mention_count for e in got} == {e.name: e.n for e in got}
    assert {e.name for e in got} >= {"Rosa", "Bruno", "Oslo"}


@pytest.mark.django_db
def test_embedding_twice_is_idempotent(world):
    ids = [
        m.pk
        for m in services.memory_remember(
            principal=world.principal("agent_a"),
            items=[MemoryInput(content="once")],
            enqueue=False,
        ).memories
    ]
    assert services.memory_embed(ids=ids) == 1
    first = list(Memory.objects.get(pk=ids[0]).embedding)
    assert services.memory_embed(ids=ids) == 0
    assert list(Memory.objects.get(pk=ids[0]).embedding) == first


TEXTS = [
    "yesterday Caroline went to the pottery workshop",
    "last week Melanie painted a sunset",
    "the release checklist: tests, tag, deploy",
    "we heard that Jon lost his job as a banker",
    "in May Gina opened an online clothing store",
]


def _pending(world, texts):
    return _pending_of(world.principal("agent_a"), *texts)


@pytest.mark.django_db
def test_rows_past_one_batch_are_embedded_in_chunks_each_as_if_alone(world, settings):
    settings.MNEMO_EMBEDDING_BATCH = 2
    ids = _pending(world, TEXTS)
    assert services.memory_embed(ids=ids) == 5
    rows = {m.pk: m for m in Memory.objects.filter(pk__in=ids)}
    assert {m.embedding_state for m in rows.values()} == {EmbeddingState.READY}
    alone = embeddings.embed_texts(TEXTS, batch_size=1)
    got = np.array([rows[i].embedding for i in ids])
    assert (got * alone).sum(axis=1).min() > 0.9999  # right vector on the right row
    # entity links are written chunk by chunk too (one row of each chunk names someone)
    named = set(
        Memory.objects.filter(mentions__isnull=False).values_list("id", flat=True)
    )
    assert {ids[0], ids[1], ids[3], ids[4]} <= named


@pytest.mark.django_db
def test_a_chunk_that_fails_keeps_the_chunks_stored_before_it(
    world, settings, monkeypatch
):
    settings.MNEMO_EMBEDDING_BATCH = 2
    ids = _pending(world, TEXTS)
    real, calls = embeddings.embed_texts, []

    def second_chunk_fails(texts, **kw):
        calls.append(texts)
        if len(calls) == 2:
            raise embeddings.EmbedderUnavailable("model went away")
        return real(texts, **kw)

    monkeypatch.setattr(embeddings, "embed_texts", second_chunk_fails)
    with pytest.raises(embeddings.EmbedderUnavailable):
        services.memory_embed(ids=ids)
    services.memory_embed_failed(ids=ids, error="model went away")
    states = dict(
        Memory.objects.filter(pk__in=ids).values_list("id", "embedding_state")
    )
    assert [states[i] for i in ids] == ["ready", "ready", "failed", "failed", "failed"]
    monkeypatch.setattr(embeddings, "embed_texts", real)
    assert services.memory_embed(ids=ids) == 3  # a retry embeds only what is left


# --- a real worker --------------------------------------------------------------------


def _redis_or_fail() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    client.ping()  # CI starts redis-server; a missing Redis is a failure, not a skip
    client.flushdb()
    return client


@pytest.fixture
def worker(live_server):
    """A real `celery worker` process on Redis, sharing the test database."""
    _redis_or_fail()
    db = connection.settings_dict
    env = {
        **os.environ,
        "CELERY_BROKER_URL": REDIS_URL,
        "MNEMO_DATA_DIR": db["MNEMO_EMBEDDED_DIR"] or "",
        "MNEMO_DB_NAME": db["NAME"],
        "MNEMO_LOG_LEVEL": "WARNING",
    }
    if not db.get("MNEMO_EMBEDDED_DIR"):
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        )
    proc = subprocess.Popen(
        solo_worker_argv(),
        cwd=Path(dj_settings.BASE_DIR),
        env=env,
    )
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    conf.task_always_eager = False
    point_broker(REDIS_URL)
    yield proc
    conf.task_always_eager = saved[1]
    point_broker(saved[0])
    proc.terminate()
    proc.wait(timeout=20)


def point_broker(url: str) -> None:
    """Send this process's tasks to ``url`` from now on (drops pooled connections)."""
    celery_app.conf.broker_url = url
    celery_app._pool = None
    if "amqp" in celery_app.__dict__:
        celery_app.amqp._producer_pool = None


def _wait_ready(ids: list[int], timeout: float = 90.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = Memory.objects.filter(
            pk__in=ids, embedding_state=EmbeddingState.READY
        ).count()
        if ready == len(ids):
            return ready
        time.sleep(0.5)
    return Memory.objects.filter(
        pk__in=ids, embedding_state=EmbeddingState.READY
    ).count()


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_a_real_celery_worker_embeds_rows_written_over_http(world, worker, live_server):
    import json
    import urllib.request

    def call(path: str, body: dict) -> dict:
        req = urllib.request.Request(
            live_server.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {world.agent_a_key}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback
            return json.loads(resp.read())

    sid = call("/api/v1/sessions", {"external_id": "worker-run"})["id"]
    written = call(
        f"/api/v1/sessions/{sid}/messages",
        {
            "messages": [
                {"content": f"message number {i} about gardening"} for i in range(12)
            ]
        },
    )
    ids = [item["id"] for item in written["items"]]
    assert written["pending"] == 12
    assert _wait_ready(ids) == 12


def _worker_sessions() -> set[tuple[int, object]]:
    """(pid, start) of other sessions idle after a task's scope reset: the worker's
    connection between tasks (the web's scope statements are transaction-local)."""
    with connection.cursor() as c:
        c.execute(
            "SELECT pid, backend_start FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND state = 'idle' AND query LIKE %s",
            ["%set_config('mnemo.scope'%, false)%"],
        )
        return set(c.fetchall())


def _until(probe, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_its_tasks_on_one_database_session(world, worker):
    """Celery's Django fix-up would open a new PostgreSQL session for every task
    (~10 ms each); CELERY_DB_REUSE_MAX lets the worker keep its connection."""
    first = _pending(world, ["the first task's row"])
    from memory.tasks import embed_memories

    embed_memories.delay(first)
    assert _wait_ready(first) == 1
    before = _until(_worker_sessions)
    assert before, "no worker session left open after its task"
    for i in range(3):
        ids = _pending(world, [f"a later task's row {i}"])
        embed_memories.delay(ids)
        assert _wait_ready(ids) == 1
    after = _until(lambda: _worker_sessions() & before)
    assert after, (before, _worker_sessions())


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_rows_written_while_the_broker_is_down_are_embedded_after_the_sweep(
    world, worker
):
    point_broker("redis://127.0.0.1:1/0")  # nothing listens there
    principal = world.principal("agent_a")
    result = services.memory_remember(
        principal=principal,
        items=[MemoryInput(content=f"written during the outage {i}") for i in range(5)],
    )
    ids = [m.pk for m in result.memories]
    assert Memory.objects.filter(pk__in=ids, embedding_state="pending").count() == 5
    point_broker(REDIS_URL)
    assert services.sweep_pending(older_than_seconds=0) >= 5
    assert _wait_ready(ids) == 5
