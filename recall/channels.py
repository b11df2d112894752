"""Retrieval channels: the only module with vector and full-text SQL.

Every query starts from :func:`recall.scope.eligibility_sql`, so visibility, status and
the request's filters are enforced inside the database, before ranking, for every
channel. Each function returns 1-based ranked :class:`ChannelHit` lists.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.principals import Principal
from config.db.arrays import IntArray
from config.db.prepared import lookup_rows
from memory.access import visibility_sql
from memory.vector_indexes import index_name as tenant_index_name
from recall import term_stats
from recall.pipeline.types import ChannelHit
from recall.scope import Scope, eligibility_sql

_TERM = re.compile(r"[a-z0-9]+")
MAX_TERMS = 32
# A small scope finds its lexical candidates by testing each row's tsvector, not
# through a GIN index. The planner prices a GIN bitmap far below its cost: it ANDed the
# shared GIN's matches of common words (20k of 100k rows, 3-5 ms to build) with a small
# org's own ~1,000 rows, which it reads anyway; at 1M a 3,000-row phase-1 scope of a
# 44k-row org took 38 ms through the indexes and 3.5 ms tested row by row. Testing
# costs ~1-1.5 us a row, bounded by the scope; a bitmap grows with the org or the whole
# table. So a scope is scanned when it holds at most MNEMO_LEXICAL_SCAN_MAX_ROWS rows,
# or at most LEXICAL_SCAN_SHARE_MAX_ROWS that are at most LEXICAL_SCAN_SHARE of its
# org's rows (every org GIN holds the whole org). Lexical statements of one recall per
# org, GIN always -> this rule: 100k 101.6 -> 62.0 ms (94 statements), 1M 254.6 ->
# 124.1 ms (92) (docs/benchmarks.md, session 20).
LEXICAL_SCAN_SHARE = 0.2
LEXICAL_SCAN_SHARE_MAX_ROWS = 5000


def scan_lexically(scope: Scope, population: int, candidate_cap: int) -> bool:
    """Whether the lexical channel tests the scope's rows instead of a GIN index.

    Never when the cap could cut the candidates (then which ones it keeps would depend
    on the plan) or when ``MNEMO_LEXICAL_SCAN_MAX_ROWS`` is 0.
    """
    limit = int(settings.MNEMO_LEXICAL_SCAN_MAX_ROWS)
    if limit <= 0 or population > candidate_cap:
        return False
    if population <= limit:
        return True
    if population > LEXICAL_SCAN_SHARE_MAX_ROWS or scope.principal.org_id is None:
        return False
    return population <= LEXICAL_SCAN_SHARE * _org_rows(int(scope.principal.org_id))


BM25_K1 = 1.2
BM25_B = 0.75


# Measured (docs/benchmarks.md): for a tenant holding 22% of 100k rows, recall@10 of the
# filtered HNSW scan against exact search was 0.946 at ef_search 100 and 0.952 at 200
# (10k: 0.922 / 0.958), for +2 ms a scan; small tenants are exact either way.
MIN_EF_SEARCH = 200
# At 1M rows the largest tenant's own index holds 220k rows, and recall@10 against exact
# search was 0.932 at ef_search 200, 0.950 at 300 and 0.954 at 400 (small tenant 0.964 /
# 0.974 / 0.976); at 100k (22k rows) 200 gave 0.984 (docs/benchmarks.md, session 6).
# Session 18, 250 questions embedded as recall embeds them (one at a time): 0.936 at
# 400, 0.960 at 600, 0.970 at 800, for ~7 ms more a scan than 400 on that tenant only.
LARGE_TENANT_ROWS = 100_000
LARGE_TENANT_EF_SEARCH = 800


def set_vector_search_params(*, ef_search: int = MIN_EF_SEARCH) -> None:
    """Per transaction: filtered HNSW scans keep going until they find k rows.

    ``ef_search`` is raised to at least :data:`MIN_EF_SEARCH`.
    """
    ef = int(max(ef_search, MIN_EF_SEARCH))
    with connection.cursor() as c:  # one round trip for both
        c.execute(
            f"SET LOCAL hnsw.ef_search = {ef}; "
            "SET LOCAL hnsw.iterative_scan = relaxed_order"
        )


@lru_cache(maxsize=16)
def _vector_literal(raw: bytes) -> str:
    """pgvector's text form of a float32 vector; a recall searches with the same
    vector in several phases and channels, so it is formatted once."""
    values = np.frombuffer(raw, dtype=np.float32).tolist()
    return "[" + ",".join(map("{:.6f}".format, values)) + "]"


def vector_channel(
    scope: Scope,
    query_vector: np.ndarray,
    *,
    k: int,
    channel: str = "vector",
    min_score: float | None = None,
) -> list[ChannelHit]:
    """Nearest rows by cosine similarity (pgvector HNSW), within the scope."""
    where, params = eligibility_sql(scope)
    vec = _vector_literal(np.asarray(query_vector, dtype=np.float32).tobytes())
    sql = (
        "SELECT id, score FROM ("
        f"  SELECT m.id, 1 - (m.embedding <=> %s::vector) AS score FROM memory_memory m"
        f"  WHERE {where} AND m.embedding IS NOT NULL"
        "   ORDER BY m.embedding <=> %s::vector LIMIT %s"
        ") ranked ORDER BY score DESC, id"
    )
    with connection.cursor() as c:
        c.execute(sql, [vec, *params, vec, k])
        rows = c.fetchall()
    if min_score is not None:
        rows = [r for r in rows if r[1] >= min_score]
    return [
        ChannelHit(channel, mid, i, float(score))
        for i, (mid, score) in enumerate(rows, 1)
    ]


def query_terms(keywords: Sequence[str]) -> list[str]:
    """Safe lowercase terms for tsquery building (letters and digits only)."""
    terms: list[str] = []
    for word in keywords:
        for term in _TERM.findall(word.lower()):
            if term not in terms:
                terms.append(term)
    return terms[:MAX_TERMS]


def lexical_channel(
    scope: Scope,
    keywords: Sequence[str],
    *,
    k: int,
    channel: str = "lexical",
    candidate_cap: int = 2000,
) -> list[ChannelHit]:
    """Full-text search with OR semantics and BM25-style, IDF-aware ranking.

    Candidates are rows matching any query term (GIN index on the generated tsvector),
    at most ``candidate_cap`` of them (only tenants of many thousand rows reach it).
    Each matched term adds ``idf * saturation(length)``; IDF is computed over the
    eligible rows, so a rare matching word outranks a common one. A term matched only
    in the retrieval context (weight B) counts half.

    A small scope (:func:`scan_lexically`) tests its rows' vectors instead of
    reading a GIN index: the same candidates (none is cut by the cap), at a cost
    bounded by the scope rather than by how often the query's words occur in the org
    or the whole table.

    When the scope holds more rows than ``candidate_cap``, candidates come from the
    query's rare terms only (:func:`probe_terms`): a word in more than
    :data:`COMMON_TERM_FREQ` of the scope's rows adds little to a score, and probing it
    read tens of thousands of index entries and filled the cap with arbitrary rows.
    Such terms still score on the candidates. A rare term's document frequency is
    counted over the whole scope; a common one's is its share of the candidates scaled
    to the scope (and at least the common threshold). When every term is common, the
    least common one probes.
    """
    terms = query_terms(keywords)
    if not terms:
        return []
    where, params = eligibility_sql(scope)
    population = _population(scope)
    none: list[float | None] = [None] * len(terms)
    probe, exact, floors = terms, none, list(none)
    if population > candidate_cap:
        probe, exact, floors = probe_terms(
            scope, terms, population, candidate_cap=candidate_cap
        )
    # ts_match_vq is the function behind @@; called by name it is not an index clause.
    match = (
        "ts_match_vq(m.search, to_tsquery('english', %s))"
        if scan_lexically(scope, population, candidate_cap)
        else "m.search @@ to_tsquery('english', %s)"
    )
    sql = f"""
    WITH live AS (
        SELECT t, q, qa, df_exact, df_floor FROM (
            SELECT t, df_exact, df_floor, to_tsquery('english', t) AS q,
                   to_tsquery('english', t || ':A') AS qa
            FROM unnest(%s::text[], %s::float8[], %s::float8[])
                 AS x(t, df_exact, df_floor)
        ) terms WHERE numnode(q) > 0
    ), cand AS MATERIALIZED (
        SELECT m.id, m.search, GREATEST(length(m.search), 1)::float8 AS len
        FROM memory_memory m
        WHERE {where}
          AND {match}
        LIMIT %s
    ), hits AS MATERIALIZED (  -- one pass: each (candidate, term) match tested once
        SELECT cand.id, cand.len, live.t,
               CASE WHEN cand.search @@ live.qa THEN 1.0 ELSE 0.5 END::float8 AS w
        FROM cand JOIN live ON cand.search @@ live.q
    ), stats AS MATERIALIZED (
        SELECT GREATEST(avg(len), 1) AS avglen, count(*)::float8 AS n FROM cand
    ), df AS MATERIALIZED (  -- exact when counted; a common term's share of the
        -- candidates scaled to the scope (at least its known floor); else counted here
        SELECT h.t, COALESCE(
            max(live.df_exact),
            CASE WHEN max(live.df_floor) IS NULL THEN count(*)::float8
                 ELSE GREATEST(max(live.df_floor),
                               count(*) * %s / GREATEST((SELECT n FROM stats), 1))
            END) AS df
        FROM hits h JOIN live ON live.t = h.t GROUP BY h.t
    )
    SELECT h.id,
           sum(ln(1 + (GREATEST(stats.n, %s) - df.df + 0.5) / (df.df + 0.5)) * h.w
               * ({BM25_K1} + 1) / (1 + {BM25_K1} * (1 - {BM25_B}
                                      + {BM25_B} * h.len / stats.avglen))) AS score,
           count(*) AS matched
    FROM hits h JOIN df ON df.t = h.t CROSS JOIN stats
    GROUP BY h.id
    ORDER BY score DESC, h.id
    LIMIT %s
    """
    with connection.cursor() as c:
        c.execute(
            sql,
            [terms, exact, floors, *params, " | ".join(probe), candidate_cap]
            + [population, population, k],
        )
        rows = c.fetchall()
    return [
        ChannelHit(channel, mid, i, float(score), {"matched_terms": int(matched)})
        for i, (mid, score, matched) in enumerate(rows, 1)
    ]


# A term in more than this share of a large scope's rows is "common": it does not find
# candidates there (see lexical_channel).
COMMON_TERM_FREQ = 0.05
_df_cache: dict[tuple[str, ...], tuple[float, int]] = {}


def probe_terms(
    scope: Scope, terms: list[str], population: int, *, candidate_cap: int = 2000
) -> tuple[list[str], list[float | None], list[float | None]]:
    """The terms that find candidates, each term's document frequency where the
    candidates will not tell it (rare terms) and the floor of a common term's (it is in
    more rows than that).

    With the org's counted term statistics (:mod:`recall.term_stats`) this reads the
    query's lexemes by key: counts are scaled from the org's active rows of the scope's
    tiers to the scope's own population, and when every rare term's rows fit among the
    candidates their document frequencies are left to the candidate query, which counts
    them exactly over the eligible rows. Without statistics (a new org, or before the
    first refresh) it counts matching eligible rows per term, stopping at the common
    threshold, so a common word costs an index scan but not a visit to each of its rows
    (cached per process like the population).
    """
    threshold = max(1, math.ceil(COMMON_TERM_FREQ * population))
    stats = None
    if scope.principal.org_id is not None:
        stats = term_stats.lookup(scope.principal.org_id, scope.tiers, terms)
    if stats is None:
        df = _term_df(scope, terms, cap=threshold + 1)
        rare = [t for t in terms if 0 < df[t] <= threshold]
        if not rare:  # every term is common (or absent): the least common one probes
            rare = [min(terms, key=lambda t: (df[t] == 0, df[t]))]
        return (
            rare,
            [float(df[t]) if df[t] <= threshold else None for t in terms],
            [None if df[t] <= threshold else float(df[t]) for t in terms],
        )
    scale = min(1.0, population / stats.rows) if stats.rows else 1.0
    est = {t: n * scale for t, n in stats.df.items()}
    # A term absent when counted may be new since: it probes (an index lookup).
    rare = [t for t in terms if t in est and est[t] <= threshold]
    if not any(est[t] > 0 for t in rare):  # every term found then is common:
        found = [t for t in terms if est.get(t, 0) > 0]  # the least common one probes
        rare += [min(found, key=lambda t: est[t])] if found else []
    if not rare:
        rare = terms[:1]
    fits = sum(stats.df[t] for t in rare if t in stats.df) <= candidate_cap
    exact: list[float | None] = []
    floors: list[float | None] = []
    for t in terms:
        if t in rare:
            exact.append(None if fits else max(1.0, est.get(t, 1.0)))
            floors.append(None)
        else:
            exact.append(None)
            floors.append(max(float(threshold + 1), est.get(t, 0.0)))
    return rare, exact, floors


def _term_df(scope: Scope, terms: list[str], *, cap: int) -> dict[str, int]:
    """Eligible rows matching each term, counted up to ``cap`` (cached for
    :data:`POPULATION_TTL_S`)."""
    where, params = eligibility_sql(scope)
    base = (*_scope_key(where, params), cap)
    out: dict[str, int] = {}
    missing = []
    for t in terms:
        hit = _cached(_df_cache, (*base, t))
        if hit is None:
            missing.append(t)
        else:
            out[t] = int(hit)
    if missing:
        with connection.cursor() as c:
            c.execute(
                "SELECT t, (SELECT count(*) FROM (SELECT 1 FROM memory_memory m "
                f"WHERE {where} AND m.search @@ q LIMIT %s) s) "
                "FROM (SELECT t, to_tsquery('english', t) AS q "
                "FROM unnest(%s::text[]) AS t) x WHERE numnode(q) > 0",
                [*params, cap, missing],
            )
            counted = dict(c.fetchall())
        for t in missing:
            out[t] = int(counted.get(t, 0))
            _remember(_df_cache, (*base, t), out[t], POPULATION_TTL_S)
    return out


# N of IDF changes slowly and counting it cost ~23-41 ms a call for a 22k-row tenant at
# 100k rows: cached per process and scope for five minutes (a miss every 30 s was a
# regular p95 outlier under load).
POPULATION_TTL_S = 300.0
_population_cache: dict[tuple[str, ...], tuple[float, int]] = {}


def _population(scope: Scope) -> int:
    """Number of eligible rows (the N of IDF), counted up to a cap; cached briefly."""
    where, params = eligibility_sql(scope)
    return _counted(_scope_key(where, params), f"m WHERE {where}", params)


def _org_rows(org_id: int) -> int:
    """Rows of the org in any tier, status or visibility, up to a cap; cached."""
    key = (connection.settings_dict["NAME"], "org rows", str(org_id))
    return _counted(key, "m WHERE m.org_id = %s", [org_id])


def _counted(key: tuple[str, ...], rows: str, params: Sequence[Any]) -> int:
    """``count(*)`` of ``memory_memory {rows}`` up to 200,000, kept for
    :data:`POPULATION_TTL_S`."""
    hit = _cached(_population_cache, key)
    if hit is not None:
        return int(hit)
    with connection.cursor() as c:
        c.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memory_memory {rows} LIMIT 200000) s",
            params,
        )
        n = int(c.fetchone()[0])
    _remember(_population_cache, key, n, POPULATION_TTL_S)
    return n


def _scope_key(where: str, params: Sequence[Any]) -> tuple[str, ...]:
    """Cache key of an eligibility scope in this database (population, term counts)."""
    return (connection.settings_dict["NAME"], where, *map(repr, params))


def _cached(cache: dict[Any, tuple[float, Any]], key: Any) -> Any:
    """A per-process cache entry if it has not expired, else None."""
    hit = cache.get(key)
    return hit[1] if hit is not None and hit[0] > time.monotonic() else None


def _remember(
    cache: dict[Any, tuple[float, Any]], key: Any, value: Any, ttl: float
) -> None:
    """Keep ``value`` for ``ttl`` seconds (the cache is emptied past 4,096 keys)."""
    if len(cache) > 4096:
        cache.clear()
    cache[key] = (time.monotonic() + ttl, value)


def temporal_channel(
    scope: Scope,
    query_vector: np.ndarray | None,
    window: Any,
    *,
    k: int,
    channel: str = "temporal",
    min_score: float | None = None,
) -> list[ChannelHit]:
    """Rows that happened inside the query's time window, most similar first."""
    from dataclasses import replace

    start, end = window.start, window.end
    lo = max(start, scope.occurred_after) if scope.occurred_after else start
    hi = min(end, scope.occurred_before) if scope.occurred_before else end
    windowed = replace(scope, occurred_after=lo, occurred_before=hi)
    if query_vector is not None:
        hits = vector_channel(
            windowed, query_vector, k=k, channel=channel, min_score=min_score
        )
        return [
            ChannelHit(channel, h.memory_id, h.rank, h.score, {"window": True})
            for h in hits
        ]
    where, params = eligibility_sql(windowed)
    with connection.cursor() as c:
        c.execute(
            f"SELECT m.id FROM memory_memory m WHERE {where} "
            "ORDER BY m.occurred_at DESC, m.id LIMIT %s",
            [*params, k],
        )
        rows = c.fetchall()
    return [
        ChannelHit(channel, r[0], i, 1.0, {"window": True})
        for i, r in enumerate(rows, 1)
    ]


# Query entity names -> ids: org-scoped, by normalised name or alias (params: org,
# names, names). Used by find_entities and the store probe.
_ENTITY_MATCH = (
    "FROM memory_entity e WHERE e.org_id = %s "
    "AND (e.normalized_name = ANY(%s) OR e.aliases && %s::varchar[])"
)


def _normalised_names(names: Sequence[str]) -> list[str]:
    return [re.sub(r"\s+", " ", n.strip().lower()) for n in names if n.strip()]


def find_entities(scope: Scope, names: Sequence[str]) -> dict[str, int]:
    """Entity ids (org-scoped, not merged away) for normalised query entity names."""
    normalised = _normalised_names(names)
    if not normalised:
        return {}
    with connection.cursor() as c:
        c.execute(
            "SELECT e.normalized_name, COALESCE(e.merged_into_id, e.id) "
            + _ENTITY_MATCH,
            [scope.principal.org_id, normalised, normalised],
        )
        return dict(c.fetchall())


SPEAKERS_TTL_S = 60.0
_speakers_cache: dict[tuple[object, ...], tuple[float, frozenset[str]]] = {}


def known_speakers(scope: Scope) -> frozenset[str]:
    """Lower-cased speaker names of the org's rows (cached per process briefly).

    Read with a recursive skip scan over the ``(org_id, speaker)`` index, so the cost
    is one index probe per distinct speaker, not one per row.
    """
    org_id = scope.principal.org_id
    if org_id is None:
        return frozenset()
    key = (connection.settings_dict["NAME"], org_id)
    hit = _cached(_speakers_cache, key)
    if hit is not None:
        return frozenset(hit)
    with connection.cursor() as c:
        c.execute(
            """
            WITH RECURSIVE s(speaker) AS (
                (SELECT speaker FROM memory_memory WHERE org_id = %s AND speaker > ''
                 ORDER BY speaker LIMIT 1)
                UNION ALL
                SELECT (SELECT m.speaker FROM memory_memory m
                        WHERE m.org_id = %s AND m.speaker > s.speaker
                        ORDER BY m.speaker LIMIT 1)
                FROM s WHERE s.speaker IS NOT NULL
            )
            SELECT speaker FROM s WHERE speaker IS NOT NULL LIMIT 1000
            """,
            [org_id, org_id],
        )
        names = frozenset(r[0].strip().lower() for r in c.fetchall() if r[0].strip())
    _remember(_speakers_cache, key, names, SPEAKERS_TTL_S)
    return names


def speakers_of(memory_ids: Sequence[int]) -> dict[int, str]:
    """Lower-cased speaker of each row (rows without one are left out)."""
    if not memory_ids:
        return {}
    return dict(
        lookup_rows(
            "SELECT id, lower(speaker) FROM memory_memory "
            "WHERE id = ANY(%s) AND speaker > ''",
            [IntArray(memory_ids)],
        )
    )


def unstable_entities(entity_ids: Sequence[int]) -> list[int]:
    if not entity_ids:
        return []
    with connection.cursor() as c:
        c.execute(
            "SELECT id FROM memory_entity WHERE id = ANY(%s) AND unstable",
            [IntArray(entity_ids)],
        )
        return [r[0] for r in c.fetchall()]


def graph_edges(
    scope: Scope,
    seed_entities: Sequence[int],
    *,
    fanout: int,
    max_edges: int,
) -> list[tuple[str, str, float]]:
    """Entity-memory and entity-relationship edges around the seeds (two hops, bounded).

    Memories are reached only through eligible (visible, current) rows, so no path in
    an explanation can lead through a row the principal may not see. Hub entities count
    less: an edge weighs 1/log(2 + mentions).
    """
    if not seed_entities:
        return []
    where, params = eligibility_sql(scope)
    sql = f"""
    WITH hop1 AS (
        SELECT mm.entity_id, mm.memory_id FROM memory_entity_seed s
        CROSS JOIN LATERAL (
            SELECT x.entity_id, x.memory_id FROM memory_mention x
            JOIN memory_memory m ON m.id = x.memory_id
            WHERE x.entity_id = s.id AND {where}
            ORDER BY m.occurred_at DESC NULLS LAST, m.id DESC LIMIT %s
        ) mm
    ), hop2 AS (
        SELECT x.entity_id, x.memory_id FROM memory_mention x
        WHERE x.memory_id IN (SELECT memory_id FROM hop1)
    )
    SELECT DISTINCT e.id, h.memory_id, e.mention_count
    FROM (SELECT * FROM hop1 UNION SELECT * FROM hop2) h
    JOIN memory_entity e ON e.id = h.entity_id
    LIMIT %s
    """
    sql = sql.replace("memory_entity_seed s", "(SELECT unnest(%s::bigint[]) AS id) s")
    with connection.cursor() as c:
        c.execute(sql, [list(seed_entities), *params, fanout, max_edges])
        rows = c.fetchall()
        edges = [
            (f"e:{eid}", f"m:{mid}", 1.0 / math.log(2 + (count or 0)))
            for eid, mid, count in rows
        ]
        entity_ids = list({eid for eid, _, _ in rows} | set(seed_entities))
        vis, vparams = eligibility_sql(scope, "st")
        c.execute(
            "SELECT r.subject_id, r.object_entity_id FROM memory_relationship r "
            "JOIN memory_memory st ON st.id = r.statement_id "
            f"WHERE r.status = 'active' AND r.object_entity_id IS NOT NULL AND {vis} "
            "AND (r.subject_id = ANY(%s) OR r.object_entity_id = ANY(%s)) LIMIT %s",
            [*vparams, entity_ids, entity_ids, max_edges],
        )
        edges += [(f"e:{s}", f"e:{o}", 1.0) for s, o in c.fetchall()]
    return edges


def neighbor_ids(
    scope: Scope, memory_ids: Sequence[int], *, radius: int = 1
) -> dict[int, list[int]]:
    """Adjacent turns of the *other* party (same session, seq within ``radius``) that
    ``scope`` may return.

    The evidence beside a hit is the question it answers or the answer it got, which
    another speaker said. Adjacent turns of the same speaker (e.g. a store that keeps
    only the user's turns) are not a reply pair: spreading to them was measured to hurt
    (LongMemEval, 13 questions: turn recall_all@5 0.538 with, 0.692 without).
    """
    if not memory_ids:
        return {}
    where, params = eligibility_sql(scope, "b")
    # The bounds are computed before the join: under row-level security an expression
    # such as ``a.seq - 1`` (not leakproof) cannot become an index condition, and the
    # scan read whole sessions (4-10 ms a recall at 100k rows).
    rows = lookup_rows(
        "WITH a AS MATERIALIZED (SELECT id, session_id, seq - %s AS lo, "
        "seq + %s AS hi, speaker, role FROM memory_memory "
        "WHERE id = ANY(%s) AND seq IS NOT NULL) "
        "SELECT a.id, b.id FROM a JOIN memory_memory b "
        "ON b.session_id = a.session_id AND b.seq >= a.lo AND b.seq <= a.hi "
        "AND b.id <> a.id "
        "AND (b.speaker, b.role) IS DISTINCT FROM (a.speaker, a.role) "
        f"WHERE {where}",
        [radius, radius, IntArray(memory_ids), *params],
    )
    out: dict[int, list[int]] = {}
    for a, b in rows:
        out.setdefault(a, []).append(b)
    return out


def filter_eligible(scope: Scope, memory_ids: Sequence[int]) -> set[int]:
    """The subset of ``memory_ids`` that the scope may return (neighbours, overlays)."""
    if not memory_ids:
        return set()
    where, params = eligibility_sql(scope)
    with connection.cursor() as c:
        c.execute(
            f"SELECT m.id FROM memory_memory m WHERE m.id = ANY(%s) AND {where}",
            [IntArray(memory_ids), *params],
        )
        return {r[0] for r in c.fetchall()}


@dataclass(slots=True)
class MemoryRow:
    """A memory as recall reads it for packing and citing: plain fields, no model.

    Building Django model instances (and compiling their query) was the largest part
    of hydration; recall only reads these fields (docs/benchmarks.md, session 6).
    """

    id: int
    tier: str
    kind: str
    content: str
    occurred_at: datetime | None
    session_id: int | None
    visibility: str
    speaker: str
    external_ref: str
    org_id: int
    status: str
    source_span: dict[str, Any] | None

    @property
    def pk(self) -> int:
        return self.id

    @classmethod
    def of(cls, memory: Any) -> MemoryRow:
        """The same fields of a model instance (rows a caller named by id)."""
        return cls(**{name: getattr(memory, name) for name in _ROW_FIELDS})


_ROW_FIELDS = tuple(f.name for f in fields(MemoryRow))


def read_rows(principal: Principal, memory_ids: Sequence[int]) -> dict[int, MemoryRow]:
    """The rows of ``memory_ids`` that ``principal`` may see (visibility only: a
    caller may cite a row whatever its status), in one round trip."""
    if not memory_ids:
        return {}
    vis, params = visibility_sql(principal, "m")
    columns = ", ".join(
        f"m.{name}::text" if name == "source_span" else f"m.{name}"
        for name in _ROW_FIELDS
    )
    rows = lookup_rows(
        f"SELECT {columns} FROM memory_memory m WHERE m.id = ANY(%s) AND {vis}",
        [IntArray(memory_ids), *params],
    )
    out: dict[int, MemoryRow] = {}
    for r in rows:
        values = dict(zip(_ROW_FIELDS, r, strict=True))
        span = values["source_span"]
        values["source_span"] = json.loads(span) if span is not None else None
        out[r[0]] = MemoryRow(**values)
    return out


def any_eligible(scopes: Sequence[Scope]) -> list[bool]:
    """Whether each scope has at least one eligible row (one round trip for all)."""
    return store_probe(scopes).present


PRESENCE_TTL_S = 60.0
_presence_cache: dict[tuple[str, ...], tuple[float, bool]] = {}


def clear_caches() -> None:
    """Forget every per-process cache of this module (tests; nothing else needs to)."""
    for cache in (_df_cache, _population_cache, _speakers_cache, _presence_cache):
        cache.clear()


@dataclass(frozen=True)
class StoreProbe:
    present: list[bool]  # per scope asked about: any eligible row at all
    pending: int  # eligible rows of ``pending`` still waiting for an embedding
    reinforcement_weight: float  # the org's feedback weight (0 when unset)
    communities: bool = True  # the org has any community (unknown: assume so)
    entities: dict[str, int] | None = None  # find_entities of ``entity_names``


def store_probe(
    scopes: Sequence[Scope],
    *,
    pending: Scope | None = None,
    config_org: int | None = None,
    ef_search: int | None = None,
    entity_names: Sequence[str] = (),
    async_commit: bool = False,
) -> StoreProbe:
    """What a recall needs to know about the store before it runs, in one round trip.

    Which scopes hold any eligible row (phases 1 and 3 and the rule / lesson overlays
    read tiers many stores never fill), how many eligible rows vector recall cannot
    see yet, the org's reinforcement weight and whether it has any community; with
    ``ef_search`` it also sets the transaction's vector search parameters
    (:func:`set_vector_search_params`), with ``entity_names`` (and ``config_org``)
    it looks up the query's entities (:func:`find_entities`); with ``async_commit``
    it does what ``recall.services._telemetry_commit`` does, in this round trip.
    """
    parts: list[str] = []
    params: list[Any] = []
    head: list[str] = []
    if ef_search is not None:
        ef = int(max(ef_search, MIN_EF_SEARCH))
        if config_org is not None:
            # A tenant whose own HNSW graph is large needs a wider search for the
            # same recall (the index's tuple count is a catalog read, no scan).
            head.append(
                "set_config('hnsw.ef_search', CASE WHEN COALESCE((SELECT c.reltuples "
                "FROM pg_class c WHERE c.relname = %s), 0) >= %s THEN %s ELSE %s END, "
                "true)"
            )
            params += [
                tenant_index_name(config_org),
                LARGE_TENANT_ROWS,
                str(max(ef, LARGE_TENANT_EF_SEARCH)),
                str(ef),
            ]
        else:
            head.append("set_config('hnsw.ef_search', %s, true)")
            params.append(str(ef))
        head.append("set_config('hnsw.iterative_scan', 'relaxed_order', true)")
    if async_commit:
        head.append(
            "CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN "
            "set_config('synchronous_commit', 'off', true) END"
        )
    settings_read = len(head)
    names = _normalised_names(entity_names)
    if names and config_org is not None:
        head.append(
            "(SELECT COALESCE(json_agg(json_build_array(e.normalized_name, "
            f"COALESCE(e.merged_into_id, e.id))), '[]') {_ENTITY_MATCH})"
        )
        params += [config_org, names, names]
    # A scope seen holding an eligible row is not asked again for a while: planning
    # its EXISTS (a table with two dozen indexes) cost ~0.5 ms a recall, ~90% of the
    # probe (docs/benchmarks.md, session 18). Only "present" is remembered: a scope
    # that emptied since runs its phase and finds nothing; an empty one that filled
    # is seen at once.
    known: list[bool | None] = []
    keys: list[tuple[str, ...]] = []
    for scope in scopes:
        where, p = eligibility_sql(scope)
        key = _scope_key(where, p)
        keys.append(key)
        if _cached(_presence_cache, key):
            known.append(True)
            continue
        known.append(None)
        parts.append(f"EXISTS (SELECT 1 FROM memory_memory m WHERE {where})")
        params += p
    if pending is not None:
        where, p = eligibility_sql(pending)
        parts.append(
            "(SELECT count(*) FROM memory_memory m "
            f"WHERE m.embedding_state <> 'ready' AND {where})"
        )
        params += p
    if config_org is not None:
        parts.append(
            "(SELECT reinforcement_weight FROM recall_recallconfig WHERE org_id = %s)"
        )
        parts.append("EXISTS (SELECT 1 FROM recall_community WHERE org_id = %s)")
        params += [config_org, config_org]
    if not parts and not head:
        return StoreProbe([True] * len(known), 0, 0.0)
    # Generic plans suit it: no part can use a tenant's partial index (those are HNSW
    # and GIN), and planning its subqueries over memory_memory was ~90% of its cost.
    row = list(lookup_rows("SELECT " + ", ".join(head + parts), params)[0])
    entities = None
    row = row[settings_read:]
    if names and config_org is not None:
        found = row.pop(0)
        found = json.loads(found) if isinstance(found, str) else found
        entities = {str(name): int(eid) for name, eid in found}
    communities = bool(row.pop()) if config_org is not None else True
    weight = float(row.pop() or 0.0) if config_org is not None else 0.0
    count = int(row.pop()) if pending is not None else 0
    asked = iter(row)
    present = []
    for key, hit in zip(keys, known, strict=True):
        value = hit if hit is not None else bool(next(asked))
        if value and hit is None:
            _remember(_presence_cache, key, True, PRESENCE_TTL_S)
        present.append(value)
    return StoreProbe(present, count, weight, communities, entities)


def recent_rows(scope: Scope, *, k: int, channel: str = "recent") -> list[ChannelHit]:
    """The ``k`` most recent eligible rows, newest first (overlays and the fallback)."""
    where, params = eligibility_sql(scope)
    with connection.cursor() as c:
        c.execute(
            f"SELECT m.id FROM memory_memory m WHERE {where} "  # noqa: S608 - fragment
            "ORDER BY COALESCE(m.occurred_at, m.recorded_at) DESC, "
            "m.seq DESC NULLS LAST, m.id DESC LIMIT %s",
            [*params, k],
        )
        rows = c.fetchall()
    return [ChannelHit(channel, r[0], i, 1.0) for i, r in enumerate(rows, 1)]
