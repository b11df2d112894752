"""Bulk-load a generated corpus: principals by the ORM, rows by ``COPY``.

The two big indexes (HNSW on ``embedding``, GIN on ``search``) are dropped before the
copy; a bulk build is several times faster than inserting into a live HNSW graph. The
GIN index is rebuilt afterwards from its own stored definition; the shared HNSW index
is left to ``vector_indexes.sync_tenant_indexes`` (which the suite runs next, as the
beat task does on a live install): it builds the large tenants' own indexes and, by
``MNEMO_SHARED_HNSW``, no shared one (the default), a partial or a whole one, so a 1M
load no longer builds a 1M-node graph only for the sync to drop it. Every phase is
timed and reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from accounts.models import Agent, ApiKey, Organization, Team
from bench.corpus import CorpusGenerator, Row
from bench.vectors import WordVectors, real_subset, to_pgvector
from memory import embeddings
from memory.models import Entity, Memory, Session
from memory.services import embedding_text, message_context
from memory.vector_indexes import build_memory

BIG_INDEXES = ("memory_embedding_hnsw", "memory_search_gin")
LEFT_TO_SYNC = ("memory_embedding_hnsw",)  # memory/vector_indexes.py decides
BATCH = 2000


@dataclass
class LoadedCorpus:
    """Ids of what was loaded (or found), and how long each phase took."""

    org_ids: list[int]
    team_ids: dict[int, list[int]]
    agent_ids: dict[int, list[int]]
    rows: int
    timings_s: dict[str, float] = field(default_factory=dict)
    real_rows: int = 0
    reused: bool = False


def owner() -> contextlib.AbstractContextManager[None]:
    """Run a block as the table owner (row-level security's app role cannot drop
    indexes or COPY across orgs); a no-op where the project has no separate role."""
    try:
        from config.db import roles
    except ImportError:
        return contextlib.nullcontext()
    return roles.owner_mode(connection)


def bench_org_ids() -> dict[str, int]:
    return dict(
        Organization.objects.filter(slug__startswith="bench-").values_list("slug", "id")
    )


def existing_rows() -> int:
    """Corpus rows already loaded. A full count: at 1M on a cold cache it outlasted the
    30 s request statement timeout, so this maintenance read runs without one."""
    with transaction.atomic(), connection.cursor() as c:
        c.execute("SET LOCAL statement_timeout = 0")
        return Memory.objects.filter(
            org__slug__startswith="bench-", external_ref__startswith="bench:"
        ).count()


def ensure_principals(
    gen: CorpusGenerator,
) -> tuple[list[int], dict[int, list[int]], dict[int, list[int]]]:
    """One org per spec with its teams and three agents (org-wide, team 0, team 1)."""
    org_ids, team_ids, agent_ids = [], {}, {}
    for spec in gen.orgs:
        org, _ = Organization.objects.get_or_create(
            slug=spec.slug, defaults={"name": f"Bench org {spec.index}"}
        )
        teams = [
            Team.objects.get_or_create(
                org=org, slug=f"t{i}", defaults={"name": f"Team {i}"}
            )[0].pk
            for i in range(spec.n_teams)
        ]
        agents = []
        for i, team in enumerate((None, teams[0], teams[1])):
            agent, _ = Agent.objects.get_or_create(
                org=org,
                name=f"bench-agent-{i}",
                defaults={"team_id": team, "default_visibility": "org"},
            )
            agents.append(agent.pk)
        org_ids.append(org.pk)
        team_ids[spec.index] = teams
        agent_ids[spec.index] = agents
    return org_ids, team_ids, agent_ids


@contextlib.contextmanager
def scratch_org(label: str) -> Iterator[tuple[Organization, str]]:
    """A fresh org with one agent and its API key, dropped (with all it holds) on exit.

    The ingest measurement writes here: rows it adds to a corpus org (and what
    consolidation derives from them) would change what later runs' recalls read.
    """
    from recall.evaluation.runner import drop_orgs

    org = Organization.objects.create(
        name=f"bench {label}", slug=f"bench-{label}-{time.time_ns()}"[:80]
    )
    agent = Agent.objects.create(
        org=org, name=f"bench-{label}", default_visibility="org"
    )
    try:
        yield org, issue_key(agent.pk)
    finally:
        drop_orgs([org])
        # The dropped rows (and the embedding updates before them) are dead tuples
        # that the next run's index scans would step over: 9,333 after six runs at
        # 100k, as later runs slowed (docs/benchmarks.md, session 6).
        with owner(), connection.cursor() as c:
            c.execute("VACUUM (ANALYZE) memory_memory")


# The bench measures recall throughput, not the rate limiter: its keys get a per-key
# limit no load run reaches (the limiter still runs and its cost is measured). With the
# default 600 a minute, the key of the largest tenant (~22% of the load's questions) was
# throttled once a 10k load passed ~95 recalls/s (docs/benchmarks.md, session 17).
BENCH_KEY_RATE_LIMIT_PER_MINUTE = 1_000_000


def prewarm() -> dict[str, Any]:
    """Bring the memory table and its indexes into memory before anything is timed.

    The targets are for warm caches, and on this VM pages untouched for a few minutes
    leave the OS cache: a 1M run started after a 100k one measured 82.5 / 228.9 ms
    (HTTP cascade p50 / p95) and 19.6 rps where the next run of the same code gave 39.4
    / 77.6 and 57.5 (docs/benchmarks.md, session 21). Indexes go into shared buffers
    (most-read first: they are what every recall walks), the table into the OS cache
    (it is larger than shared buffers at 1M). Needs ``pg_prewarm`` (contrib; run as
    the owner). Returns the MiB read and the seconds it took.
    """
    started = time.perf_counter()
    with connection.cursor() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        c.execute(
            "SELECT coalesce(sum(pg_prewarm(i.indexrelid, 'buffer')), 0) "
            "FROM pg_index i "
            "WHERE i.indrelid = 'memory_memory'::regclass AND i.indisvalid"
        )
        index_blocks = int(c.fetchone()[0])
        c.execute("SELECT pg_prewarm('memory_memory'::regclass, 'read')")
        table_blocks = int(c.fetchone()[0])
        c.execute("SELECT current_setting('block_size')::int")
        block = int(c.fetchone()[0])
    return {
        "index_mib": round(index_blocks * block / 2**20, 1),
        "table_mib": round(table_blocks * block / 2**20, 1),
        "seconds": round(time.perf_counter() - started, 2),
    }


def issue_key(agent_id: int) -> str:
    """A fresh API key for ``agent_id`` (plaintext kept in memory only)."""
    key, plaintext = ApiKey.issue(agent=Agent.objects.get(pk=agent_id), name="bench")
    key.rate_limit_per_minute = BENCH_KEY_RATE_LIMIT_PER_MINUTE
    key.save(update_fields=["rate_limit_per_minute"])
    return plaintext


def load(
    gen: CorpusGenerator,
    rows: list[Row],
    *,
    real: int,
    wordvecs: WordVectors,
    log: Any = print,
) -> LoadedCorpus:
    """Write ``rows`` (sessions, memories, entities, mentions); embed ``real`` of them
    with the real model and the rest with the fast path."""
    t: dict[str, float] = {}
    start = time.perf_counter()
    texts, contexts = [], []
    previous: dict[int, tuple[str, str]] = {}
    for r in rows:
        ctx = ""
        if r.kind == "message":
            ctx = message_context(previous.get(r.session), r.occurred_at)
            previous[r.session] = (r.speaker, r.content)
        contexts.append(ctx)
        # Exactly what the write path embeds for such a row.
        texts.append(
            embedding_text(Memory(content=r.content, speaker=r.speaker, context=ctx))
        )
    real_pos = real_subset(len(rows), real)
    t0 = time.perf_counter()
    vectors = wordvecs.embed(texts)
    t["embed_fast_path"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ordered = sorted(real_pos)
    for s in range(0, len(ordered), 256):
        chunk = ordered[s : s + 256]
        vectors[chunk] = embeddings.embed_texts([texts[i] for i in chunk])
    t["embed_real_model"] = time.perf_counter() - t0
    log(f"embedded {len(rows)} rows ({len(ordered)} with the real model)")

    # One transaction: a failed load leaves nothing behind (and no half-built index).
    with transaction.atomic():
        with connection.cursor() as c:
            c.execute("SET LOCAL statement_timeout = 0")  # bulk work, not a request
            c.execute(f"SET LOCAL maintenance_work_mem = '{build_memory(len(rows))}'")
            c.execute("SET LOCAL max_parallel_maintenance_workers = 2")
        t0 = time.perf_counter()
        org_ids, team_ids, agent_ids = ensure_principals(gen)
        sessions = _sessions(gen, org_ids, team_ids, agent_ids)
        entities = _entities(gen, rows, org_ids)
        t["principals_sessions_entities"] = time.perf_counter() - t0
        with connection.cursor() as c:
            c.execute(
                "SELECT nextval('memory_memory_id_seq') FROM generate_series(1, %s)",
                [len(rows)],
            )
            ids = [r[0] for r in c.fetchall()]
        t0 = time.perf_counter()
        defs = _drop_big_indexes()
        _copy_memories(
            rows,
            ids,
            contexts,
            vectors,
            real_pos,
            org_ids,
            team_ids,
            agent_ids,
            sessions,
        )
        _copy_mentions(rows, ids, entities, org_ids)
        t["copy"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with connection.cursor() as c:
            # Check the deferred foreign keys now: PostgreSQL will not build an index
            # on a table with pending trigger events.
            c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        _rebuild([d for d in defs if d.split()[2] not in LEFT_TO_SYNC], t)
        t["build_total"] = time.perf_counter() - t0
    # VACUUM, not only ANALYZE: a million inserted rows trip autovacuum's insert
    # threshold, and its pass over the table and every index (each tenant's HNSW
    # among them) ran inside the first 1M run's timings (docs/benchmarks.md,
    # session 22). Vacuumed here, before the tenant indexes exist, it is cheap, sets
    # the visibility map, and leaves autovacuum nothing to start.
    t0 = time.perf_counter()
    with connection.cursor() as c:
        c.execute("SET statement_timeout = 0")  # outside a transaction: session-wide
        c.execute("VACUUM (ANALYZE) memory_memory")
        c.execute("VACUUM (ANALYZE) memory_mention")
        c.execute("RESET statement_timeout")
    t["vacuum"] = time.perf_counter() - t0
    t["total"] = time.perf_counter() - start
    return LoadedCorpus(
        org_ids,
        team_ids,
        agent_ids,
        len(rows),
        {k: round(v, 2) for k, v in t.items()},
        real_rows=len(ordered),
    )


def _sessions(
    gen: CorpusGenerator,
    org_ids: list[int],
    team_ids: dict[int, list[int]],
    agent_ids: dict[int, list[int]],
) -> dict[int, int]:
    objs = [
        Session(
            org_id=org_ids[s.org],
            external_id=f"bench-s{s.index}",
            visibility=s.visibility,
            team_id=team_ids[s.org][s.team] if s.team is not None else None,
            owner_agent_id=agent_ids[s.org][s.agent],
            started_at=s.started_at,
        )
        for s in gen.sessions
    ]
    created = Session.objects.bulk_create(objs, batch_size=BATCH)
    return {s.index: obj.pk for s, obj in zip(gen.sessions, created, strict=True)}


def _entities(
    gen: CorpusGenerator, rows: list[Row], org_ids: list[int]
) -> dict[tuple[int, str], int]:
    counts: dict[tuple[int, str], int] = {}
    for r in rows:
        for e in r.entities:
            counts[(r.org, e)] = counts.get((r.org, e), 0) + 1
    kinds = {}
    for spec in gen.orgs:
        for names, kind in (
            (spec.people, "person"),
            (spec.projects, "thing"),
            (spec.places, "place"),
        ):
            for n in names:
                kinds[(spec.index, n)] = kind
    objs = [
        Entity(
            org_id=org_ids[o],
            name=n,
            normalized_name=n.lower(),
            type=kinds[(o, n)],
            mention_count=c,
        )
        for (o, n), c in counts.items()
    ]
    created = Entity.objects.bulk_create(objs, batch_size=BATCH)
    return {key: obj.pk for key, obj in zip(counts, created, strict=True)}


def _drop_big_indexes() -> list[str]:
    with connection.cursor() as c:
        c.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)",
            [list(BIG_INDEXES)],
        )
        defs = c.fetchall()
        for name, _ in defs:
            c.execute(f'DROP INDEX "{name}"')
    return [d for _, d in defs]


def _rebuild(defs: list[str], timings: dict[str, float]) -> None:
    with connection.cursor() as c:
        for d in defs:
            t0 = time.perf_counter()
            c.execute(d)
            name = d.split()[2]
            timings[f"build_{name}"] = time.perf_counter() - t0


MEMORY_COLUMNS = (
    "id",
    "org_id",
    "visibility",
    "team_id",
    "owner_user_id",
    "owner_agent_id",
    "session_id",
    "seq",
    "tier",
    "kind",
    "content",
    "context",
    "role",
    "speaker",
    "metadata",
    "embedding",
    "embedding_state",
    "embedding_error",
    "embedding_attempts",
    "embedded_at",
    "keywords",
    "content_sha256",
    "idempotency_key",
    "occurred_at",
    "valid_from",
    "valid_to",
    "recorded_at",
    "superseded_at",
    "status",
    "superseded_by_id",
    "source_span",
    "external_ref",
    "confidence",
    "reinforcement",
    "env_tags",
    "access_count",
)


def _copy_memories(
    rows: list[Row],
    ids: list[int],
    contexts: list[str],
    vectors: Any,
    real_pos: set[int],
    org_ids: list[int],
    team_ids: dict[int, list[int]],
    agent_ids: dict[int, list[int]],
    sessions: dict[int, int],
) -> None:
    now = datetime.now(UTC)
    meta_real, meta_fast = (
        json.dumps({"bench_vec": "real"}),
        json.dumps({"bench_vec": "fast"}),
    )
    sql = f"COPY memory_memory ({', '.join(MEMORY_COLUMNS)}) FROM STDIN"
    raw = connection.connection.cursor()  # type: ignore[union-attr]
    with raw.copy(sql) as copy:
        for pos, (r, mid) in enumerate(zip(rows, ids, strict=True)):
            copy.write_row(
                (
                    mid,
                    org_ids[r.org],
                    r.visibility,
                    team_ids[r.org][r.team] if r.team is not None else None,
                    None,
                    agent_ids[r.org][r.agent],
                    sessions[r.session],
                    r.seq,
                    r.tier,
                    r.kind,
                    r.content,
                    contexts[pos],
                    "user" if r.kind == "message" else "",
                    r.speaker,
                    meta_real if pos in real_pos else meta_fast,
                    to_pgvector(vectors[pos]),
                    "ready",
                    "",
                    0,
                    now,
                    "{}",
                    hashlib.sha256(r.content.encode()).hexdigest(),
                    None,
                    r.occurred_at,
                    None,
                    None,
                    r.occurred_at,
                    None,
                    "active",
                    None,
                    None,
                    f"bench:{pos}",
                    1.0,
                    "{}",
                    "{}",
                    0,
                )
            )


def _copy_mentions(
    rows: list[Row],
    ids: list[int],
    entities: dict[tuple[int, str], int],
    org_ids: list[int],
) -> None:
    raw = connection.connection.cursor()  # type: ignore[union-attr]
    with raw.copy(
        'COPY memory_mention (org_id, memory_id, entity_id, surface, start, "end") '
        "FROM STDIN"
    ) as copy:
        for r, mid in zip(rows, ids, strict=True):
            for e in r.entities:
                at = r.content.find(e)
                copy.write_row(
                    (
                        org_ids[r.org],
                        mid,
                        entities[(r.org, e)],
                        e,
                        at if at >= 0 else None,
                        at + len(e) if at >= 0 else None,
                    )
                )


__all__ = ["LoadedCorpus", "ensure_principals", "issue_key", "load"]
