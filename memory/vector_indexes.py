"""Per-tenant partial HNSW (and GIN) indexes for organisations that hold many rows.

One HNSW index over every org serves small tenants well (the planner scans their few
rows exactly) and fails mid-size and large ones: a filtered scan walks the shared graph
through other tenants' rows until it has k of its own. At 100k rows an org holding
11% of them took 13-50 ms a vector query on the shared index and 6 ms on its own partial
index (``WHERE org_id = N``); the 22% tenant 7 -> 5.6 ms, p95 15 -> 8 ms
(docs/benchmarks.md, session 3). Recall SQL names the org as a literal (client-side
binding), so the planner matches the partial index by its predicate.

``sync_tenant_indexes`` creates an index for every org with at least ``min_rows``
embedded rows and drops those of orgs that fell under half of it (hysteresis, so an
org near the line does not flap). Indexes are built ``CONCURRENTLY`` as the table
owner: writes go on while they build. Run it from ``manage.py vector_indexes`` or the
beat task (every 6 h); both are idempotent. The embedding task also requests a sync as
soon as an org it stored rows for crosses the line (:func:`orgs_due`).

The **shared** HNSW index (``memory_embedding_hnsw``, built by the migrations over every
row) serves only orgs without an index of their own, yet every stored vector went into
it: at 1M rows storing one vector of a small org cost 2.44 ms warm and 23.8 ms cold,
0.19-0.33 ms with the shared graph (1M nodes, 1.8 GB) out of the way, and a large
tenant's row went into two graphs (docs/benchmarks.md, session 18). And the orgs it is
for are cheaper to scan exactly: at 1M the planner already scanned a 4,445-row org
exactly (2.1 ms warm); over a partial shared graph of the six such orgs it took 4.1 ms
(session 19). So the sync handles it by ``MNEMO_SHARED_HNSW``:

- ``none`` (default): dropped; an org under the line is scanned exactly (~0.45 ms per
  thousand rows, so an org that outgrows the line between two syncs slows gradually).
- ``partial``: rebuilt over the rows of orgs without an index of their own (``WHERE
  org_id <> ALL ('{...}')``), built concurrently beside the old one and renamed; a
  tenant losing its own index is put back before its own is dropped. PostgreSQL proves
  ``org_id = 50`` implies such a predicate only for lists of up to 100 constants
  (``MAX_SAOP_ARRAY_SIZE`` in predtest.c): past :data:`SHARED_EXCLUDE_MAX` tenants with
  their own index it stays whole.
- ``full``: kept (or rebuilt) over every row.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

PREFIX = "memory_hnsw_org_"
_NAME = re.compile(rf"^{PREFIX}(\d+)$")
# Each such tenant also gets a partial GIN index over its full-text vectors: with only
# the shared one, a lexical candidate query of the 220k-row tenant at 1M ANDed the
# shared GIN bitmap (every org's matches) with the org_id btree bitmap (17 ms for 222k
# entries), or walked 120k posting entries of other orgs (29 ms) (docs/benchmarks.md,
# session 7).
GIN_PREFIX = "memory_gin_org_"
_GIN_NAME = re.compile(rf"^{GIN_PREFIX}(\d+)$")
# And one over its knowledge tiers alone (phase 1 of the cascade): the planner never
# ANDs two indexes that both use ``org_id = N``, so with the org-wide ones phase 1
# still read the shared GIN (180k posting entries, 65-69 ms for a four-term query of
# that tenant); with this one the same query took 0.4 ms.
KNOWLEDGE_GIN_PREFIX = "memory_gink_org_"
_KNOWLEDGE_GIN_NAME = re.compile(rf"^{KNOWLEDGE_GIN_PREFIX}(\d+)$")
# And an HNSW graph of the knowledge tiers alone: phase 1's filtered scan of the
# tenant's whole graph (a tenth of its rows pass the tier filter) took 52 ms mean,
# 154 ms p95 for the 220k-row tenant at 1M.
KNOWLEDGE_PREFIX = "memory_hnswk_org_"
_KNOWLEDGE_NAME = re.compile(rf"^{KNOWLEDGE_PREFIX}(\d+)$")
_KINDS = (_NAME, _GIN_NAME, _KNOWLEDGE_GIN_NAME, _KNOWLEDGE_NAME)
_BASE_KINDS = (_NAME, _GIN_NAME)
# Only the largest tenants get the two knowledge-tier indexes: PostgreSQL proves every
# partial index's predicate while planning every statement on the table, and with two
# of them for each of the 44 tenants of the 1M corpus planning a one-tenant query went
# from 0.39 to 1.59 ms, which slowed every stage of a recall (docs/benchmarks.md,
# session 7). ``MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS`` (100k: two tenants at 1M).


def _kinds_for(rows: int) -> tuple[re.Pattern[str], ...]:
    """The partial indexes a tenant of ``rows`` embedded rows gets."""
    big = rows >= int(settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS)
    return _KINDS if big else _BASE_KINDS


# The shared index has ef_construction 64 (memory/migrations/0002_initial.py). A
# tenant's own graph is small enough to build better: for the 22k-row tenant at 100k
# rows, recall@10 against exact search (100 off-tenant queries) went from 0.946 / 0.973
# to 0.980 / 0.987 at ef_search 100 / 200 with 128, for ~10 s of build instead of ~5.
# At 1M the 222k-row tenant's graph varied from build to build at 128: recall@10 at
# ef_search 400 was 0.932, 0.976 and 0.948 over three builds; at 200 0.994 and 0.972,
# for 122-129 s of build instead of 92 (docs/benchmarks.md, session 11).
HNSW_WITH = "m = 16, ef_construction = 200"

SHARED = "memory_embedding_hnsw"  # named in memory/models.py, built by migration 0002
SHARED_NEXT = f"{SHARED}_next"  # its replacement while it builds
# As the migration builds it (memory/migrations/0002_initial.py).
SHARED_WITH = "m = 16, ef_construction = 64"
SHARED_EXCLUDE_MAX = 100
SHARED_MODES = ("none", "partial", "full")
_ORG_IDS = re.compile(r"\d+")


@dataclass
class IndexPlan:
    create: list[tuple[int, int]] = field(default_factory=list)  # (org id, rows)
    drop: list[tuple[int, int]] = field(default_factory=list)
    keep: list[tuple[int, int]] = field(default_factory=list)
    built_s: dict[int, float] = field(default_factory=dict)
    rebuilt: list[int] = field(default_factory=list)  # invalid indexes dropped first
    trim: list[tuple[int, int]] = field(default_factory=list)  # knowledge ones dropped
    # The orgs the shared HNSW index leaves out (empty: none), now and after the sync;
    # None: no shared index.
    shared_before: set[int] | None = None
    shared_after: set[int] | None = None
    shared_built_s: float | None = None

    @property
    def shared_rebuild(self) -> bool:
        return self.shared_before != self.shared_after


def index_name(org_id: int) -> str:
    return f"{PREFIX}{int(org_id)}"


def gin_index_name(org_id: int) -> str:
    return f"{GIN_PREFIX}{int(org_id)}"


def knowledge_gin_index_name(org_id: int) -> str:
    return f"{KNOWLEDGE_GIN_PREFIX}{int(org_id)}"


def knowledge_index_name(org_id: int) -> str:
    return f"{KNOWLEDGE_PREFIX}{int(org_id)}"


def _names(org_id: int) -> dict[re.Pattern[str], str]:
    return {
        _NAME: index_name(org_id),
        _GIN_NAME: gin_index_name(org_id),
        _KNOWLEDGE_GIN_NAME: knowledge_gin_index_name(org_id),
        _KNOWLEDGE_NAME: knowledge_index_name(org_id),
    }


def _create_sql(org_id: int, rows: int) -> list[str]:
    """The statements that build the partial indexes of ``org_id``, a tenant of
    ``rows`` rows (each IF NOT EXISTS)."""
    from recall.types import PHASE_TIERS

    org = int(org_id)
    tiers = ", ".join(f"'{t}'" for t in PHASE_TIERS[1])
    hnsw = f"USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_WITH})"
    gin = "USING gin (search) WITH (fastupdate = off)"
    knowledge = f"org_id = {org} AND tier IN ({tiers})"
    body = {
        _NAME: f"{hnsw} WHERE org_id = {org}",
        _GIN_NAME: f"{gin} WHERE org_id = {org}",
        _KNOWLEDGE_GIN_NAME: f"{gin} WHERE {knowledge}",
        _KNOWLEDGE_NAME: f"{hnsw} WHERE {knowledge}",
    }
    names = _names(org)
    return [
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {names[k]} ON memory_memory {body[k]}"
        for k in _kinds_for(rows)
    ]


def build_memory(rows: int) -> str:
    """``maintenance_work_mem`` for building an HNSW index over ``rows`` rows.

    The graph of n x 384 floats needs ~2 KB a row; when it outgrows this setting
    pgvector inserts the rest on disk, many times slower (1M rows at 1 GB: 550k tuples
    in the first 9 minutes, then 10-15k a minute; docs/benchmarks.md, session 5).
    """
    return "1GB" if rows <= 400_000 else f"{-(-rows * 3 // 1_000_000)}GB"


def _indexes() -> dict[re.Pattern[str], dict[int, bool]]:
    """Per kind, org id -> whether its partial index is valid (a failed concurrent
    build leaves an invalid index behind, which the planner never uses)."""
    with connection.cursor() as c:
        c.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memory_memory'::regclass"
        )
        rows = c.fetchall()
    return {
        kind: {int(m.group(1)): bool(ok) for n, ok in rows if (m := kind.match(n))}
        for kind in _KINDS
    }


def _complete(kinds: tuple[re.Pattern[str], ...]) -> set[int]:
    valid = _indexes()
    return {org for org in valid[kinds[0]] if all(valid[k].get(org) for k in kinds)}


def existing() -> set[int]:
    """Org ids that have their own HNSW and GIN indexes, valid, now."""
    return _complete(_BASE_KINDS)


def with_knowledge_indexes() -> set[int]:
    """Org ids that also have valid knowledge-tier indexes."""
    return _complete(_KINDS)


# An org that outgrows the line between two syncs was scanned exactly (~0.45 ms per
# thousand rows) until the next sync, up to 6 hours later. The embedding task asks
# whether the orgs it just stored rows for are due (:func:`orgs_due`) and, if one is,
# enqueues a sync (memory.tasks.request_index_sync). Each org is counted at most once
# per DUE_RECHECK_S per process.
DUE_RECHECK_S = 60.0
_due_checked: dict[int, float] = {}


def orgs_due(org_ids: Iterable[int], min_rows: int | None = None) -> list[int]:
    """Orgs among ``org_ids`` without their own indexes that hold at least
    ``min_rows`` embedded rows now (reads only; at most one bounded count per org and
    process every :data:`DUE_RECHECK_S` seconds)."""
    threshold = int(
        settings.MNEMO_TENANT_HNSW_MIN_ROWS if min_rows is None else min_rows
    )
    now = time.monotonic()
    ask = sorted({int(o) for o in org_ids if _due_checked.get(int(o), 0.0) <= now})
    if not ask:
        return []
    for org in ask:
        _due_checked[org] = now + DUE_RECHECK_S
    have = existing()
    due = []
    with connection.cursor() as c:
        for org in ask:
            if org in have:
                continue
            c.execute(
                "SELECT count(*) FROM (SELECT 1 FROM memory_memory WHERE org_id = %s "
                "AND embedding IS NOT NULL LIMIT %s) s",
                [org, threshold],
            )
            if int(c.fetchone()[0]) >= threshold:
                due.append(org)
    return due


def invalid() -> set[int]:
    """Org ids with a partial index left invalid by a failed build."""
    return {org for orgs in _indexes().values() for org, ok in orgs.items() if not ok}


def _embedded_rows() -> dict[int, int]:
    with connection.cursor() as c:
        c.execute(
            "SELECT org_id, count(*) FROM memory_memory "
            "WHERE embedding IS NOT NULL GROUP BY org_id"
        )
        return {int(org): int(n) for org, n in c.fetchall()}


def plan(min_rows: int | None = None) -> IndexPlan:
    """Which partial indexes to create, drop and keep (reads only)."""
    threshold = int(
        settings.MNEMO_TENANT_HNSW_MIN_ROWS if min_rows is None else min_rows
    )
    if threshold < 1:
        raise ValueError("min_rows must be at least 1")
    mode = str(settings.MNEMO_SHARED_HNSW)
    if mode not in SHARED_MODES:
        raise ValueError(
            f"MNEMO_SHARED_HNSW must be one of {', '.join(SHARED_MODES)}, not {mode!r}"
        )
    rows = _embedded_rows()
    valid = _indexes()
    # An org missing a kind it should have (an install from before the GIN indexes, a
    # tenant grown past the knowledge-index size) is completed by ``create`` (IF NOT
    # EXISTS skips what it has); one under half of a threshold loses what it is for.
    some = {o for kind in _BASE_KINDS for o, ok in valid[kind].items() if ok}
    out = IndexPlan()
    for org, n in sorted(rows.items()):
        if n >= threshold and not all(valid[k].get(org) for k in _kinds_for(n)):
            out.create.append((org, n))
    knowledge_min = int(settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS)
    for org in sorted(set(valid[_KNOWLEDGE_NAME]) | set(valid[_KNOWLEDGE_GIN_NAME])):
        if rows.get(org, 0) < knowledge_min / 2:
            out.trim.append((org, rows.get(org, 0)))
    created = {o for o, _ in out.create}
    for org in sorted(some):
        n = rows.get(org, 0)
        if org in created:
            continue
        if n < threshold / 2:
            out.drop.append((org, n))
        else:
            out.keep.append((org, n))
    out.shared_before = shared_excluded()
    own = {o for o, _ in out.create} | {o for o, _ in out.keep if valid[_NAME].get(o)}
    out.shared_after = (
        None
        if mode == "none"
        else set()
        if mode == "full"
        else shared_exclusion(own, rows=rows)
    )
    return out


def shared_exclusion(own: set[int], *, rows: dict[int, int]) -> set[int]:
    """The orgs the shared HNSW index should leave out, given those with (or about
    to get) their own: all of them, or none past :data:`SHARED_EXCLUDE_MAX` (the
    planner could no longer prove a small org's rows are in the partial index)."""
    own = {o for o in own if rows.get(o, 0) > 0}
    return own if len(own) <= SHARED_EXCLUDE_MAX else set()


def shared_excluded() -> set[int] | None:
    """The orgs the shared HNSW index leaves out now (empty: it covers every row),
    or None when there is no valid shared index."""
    with connection.cursor() as c:
        c.execute(
            "SELECT i.indisvalid, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i "
            "WHERE i.indexrelid = to_regclass(%s)",
            [SHARED],
        )
        row = c.fetchone()
    if row is None or not row[0]:
        return None
    return {int(n) for n in _ORG_IDS.findall(row[1] or "")}


def shared_index_sql(name: str, excluded: set[int]) -> str:
    """``CREATE INDEX CONCURRENTLY`` of the shared HNSW index without ``excluded``."""
    where = ""
    if excluded:
        where = f" WHERE org_id <> ALL ('{{{','.join(map(str, sorted(excluded)))}}}')"
    return (
        f"CREATE INDEX CONCURRENTLY {name} ON memory_memory "
        f"USING hnsw (embedding vector_cosine_ops) WITH ({SHARED_WITH}){where}"
    )


def _rebuild_shared(c, excluded: set[int], rows: dict[int, int]) -> float:
    """Build the shared index anew beside the old one, then let it take the name
    (queries always have one of the two). Returns the build time in seconds."""
    started = time.perf_counter()
    covered = sum(n for org, n in rows.items() if org not in excluded)
    c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SHARED_NEXT}")  # a failed build's
    c.execute(f"SET maintenance_work_mem = '{build_memory(covered)}'")
    c.execute(shared_index_sql(SHARED_NEXT, excluded))
    c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SHARED}")
    c.execute(f"ALTER INDEX {SHARED_NEXT} RENAME TO {SHARED}")
    logger.info(
        "rebuilt %s over %d rows, leaving out %d orgs", SHARED, covered, len(excluded)
    )
    return round(time.perf_counter() - started, 2)


def sync_tenant_indexes(
    min_rows: int | None = None, *, dry_run: bool = False
) -> IndexPlan:
    """Create and drop partial HNSW and GIN indexes to match ``plan`` (as the table
    owner)."""
    from config.db import roles

    with roles.owner_mode(connection):
        todo = plan(min_rows)
        if dry_run:
            return todo
        with connection.cursor() as c:
            # A build is maintenance, not a request: no statement timeout (the
            # 220k-row tenant of the 1M benchmark outlasted the 30 s default, and the
            # cancelled concurrent build left an invalid index behind).
            c.execute("SET statement_timeout = 0")
            for kind, orgs in _indexes().items():
                for org, ok in sorted(orgs.items()):
                    if ok:
                        continue
                    name = _names(org)[kind]
                    c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    logger.warning("dropped invalid %s (a failed build)", name)
                    if org not in todo.rebuilt:
                        todo.rebuilt.append(org)
            for org, n in todo.create:
                started = time.perf_counter()
                c.execute(f"SET maintenance_work_mem = '{build_memory(n)}'")
                for statement in _create_sql(org, n):
                    c.execute(statement)
                todo.built_s[org] = round(time.perf_counter() - started, 2)
                logger.info("built %s over %d rows", index_name(org), n)
            if todo.shared_rebuild and todo.shared_after is None:
                # After the tenants' own indexes are built.
                c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SHARED_NEXT}")
                c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SHARED}")
                logger.info(
                    "dropped %s (orgs without their own are scanned exactly)", SHARED
                )
            elif todo.shared_rebuild and todo.shared_after is not None:
                # Before any tenant index goes: a dropped tenant is back in the
                # shared index first.
                todo.shared_built_s = _rebuild_shared(
                    c, todo.shared_after, _embedded_rows()
                )
            for org, n in todo.drop:
                for name in _names(org).values():
                    c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                logger.info("dropped %s (%d rows left)", index_name(org), n)
            for org, _ in todo.trim:
                for kind in (_KNOWLEDGE_GIN_NAME, _KNOWLEDGE_NAME):
                    c.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_names(org)[kind]}")
            if todo.create or todo.drop or todo.trim or todo.shared_rebuild:
                c.execute("ANALYZE memory_memory")
    return todo
