"""The measurements: recall latency (service and HTTP), ingest, filtered-search quality,
and on-disk sizes. Each returns plain dicts that the report turns into tables."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from accounts.principals import Principal
from bench.servers import Servers
from bench.stats import JsonClient, percentiles
from memory import embeddings
from memory.models import Memory
from recall import channels
from recall.scope import Scope
from recall.services import recall_run
from recall.types import RecallRequest

STAGE_ORDER = (
    "intent",
    "embed",
    "entities",
    "p1",
    "p2",
    "p3",
    "pack",
    "communities",
    "other",
    "total",
)


def stage_of(key: str) -> str:
    """Group ``timings_ms`` keys into the stages of the report (p2.vector -> p2)."""
    return key.split(".")[0]


def _stages(timings: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    per: dict[str, list[float]] = {}
    detail: dict[str, list[float]] = {}
    for t in timings:
        grouped: dict[str, float] = {}
        for key, ms in t.items():
            grouped[stage_of(key)] = grouped.get(stage_of(key), 0.0) + ms
            detail.setdefault(key, []).append(ms)
        for stage, ms in grouped.items():
            per.setdefault(stage, []).append(ms)
    n = max(1, len(timings))
    # Time inside recall_run that no stage timer covers (counts, events, packing glue).
    other = [
        t.get("total", 0.0) - sum(ms for key, ms in t.items() if key != "total")
        for t in timings
    ]
    per["other"] = other
    out = {
        s: {"mean": round(sum(v) / n, 2), "p95": percentiles(v).get("p95", 0.0)}
        for s, v in per.items()
    }
    out["_detail_mean"] = {k: round(sum(v) / n, 2) for k, v in sorted(detail.items())}
    return out


def _activate(principal: Principal) -> None:
    """Narrow the open transaction to the principal's org, as a web request does.

    Under the maintenance ("system") scope of management commands, the row-level
    security policy's OR makes PostgreSQL mis-estimate the org filter and skip the HNSW
    index for a large tenant, so measuring there would not measure what users get.
    """
    try:
        from accounts.rls import activate_principal
    except ImportError:  # a version without row-level security
        return
    activate_principal(principal)


def _as_request(principal: Principal, request: RecallRequest) -> Any:
    """``recall_run`` the way a web request runs it: one transaction, narrowed."""
    with transaction.atomic():
        _activate(principal)
        return recall_run(principal, request)


def recall_direct(
    jobs: list[tuple[Principal, str]], *, mode: str, warmup: int = 5
) -> dict[str, Any]:
    """``recall_run`` in this process, one query after the other (cold query cache)."""
    embeddings.reset_query_cache()
    for principal, query in jobs[:warmup]:
        _as_request(principal, RecallRequest(query=query, mode=mode))
    lat, timings, phases = [], [], []
    for principal, query in jobs[warmup:]:
        t0 = time.perf_counter()
        pack = _as_request(principal, RecallRequest(query=query, mode=mode))
        lat.append((time.perf_counter() - t0) * 1000)
        timings.append(pack.timings_ms)
        phases.append(pack.phase_reached)
    return {
        "latency_ms": percentiles(lat),
        "stages_ms": _stages(timings),
        "phase_reached": {str(p): phases.count(p) for p in sorted(set(phases))},
    }


def recall_http(
    servers: Servers, jobs: list[tuple[str, str]], *, mode: str, warmup: int = 10
) -> dict[str, Any]:
    """``POST /api/v1/recall`` through gunicorn with real API-key auth, sequentially."""
    clients: dict[str, JsonClient] = {}
    lat, timings, errors, samples = [], [], 0, []
    for i, (key, query) in enumerate(jobs):
        # Generous timeout: the first requests load the model in each web worker.
        c = clients.setdefault(key, JsonClient(servers.host, servers.port, key, 180.0))
        t0 = time.perf_counter()
        try:
            status, body = c.post("/api/v1/recall", {"query": query, "mode": mode})
        except OSError as exc:
            status, body = 0, {"error": f"{type(exc).__name__}: {exc}"}
        ms = (time.perf_counter() - t0) * 1000
        if i < warmup:
            continue
        if status != 200:
            errors += 1
            samples.append(f"{status}: {str(body)[:120]}")
            continue
        lat.append(ms)
        timings.append(body.get("timings_ms", {}))
    for c in clients.values():
        c.close()
    return {
        "latency_ms": percentiles(lat),
        "stages_ms": _stages(timings),
        "errors": errors,
        "error_samples": samples[:5],
    }


def model_throughput(texts: list[str], *, batch_size: int = 64) -> dict[str, float]:
    """The embedding model alone: texts per second in batches (the ingest ceiling)."""
    embeddings.embed_texts(texts[:batch_size], batch_size=batch_size)
    t0 = time.perf_counter()
    embeddings.embed_texts(texts, batch_size=batch_size)
    s = time.perf_counter() - t0
    t1 = time.perf_counter()
    for q in texts[:50]:
        embeddings.embed_texts([q + " ?"])
    single = (time.perf_counter() - t1) / min(50, len(texts)) * 1000
    return {
        "texts": len(texts),
        "texts_per_s": round(len(texts) / s, 1),
        "single_query_ms": round(single, 2),
    }


def ingest_http(
    servers: Servers,
    key: str,
    messages: list[str],
    *,
    batch: int = 10,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """POST messages in batches; time until every one is embedded (vector-searchable).

    ``write_ms`` is the write API's own latency (embedding happens after, in a worker);
    ``visible_s`` is, per message, POST return to ``embedded_at``.
    """
    c = JsonClient(servers.host, servers.port, key)
    status, sess = c.post(
        "/api/v1/sessions", {"external_id": f"bench-ingest-{time.time_ns()}"}
    )
    if status != 201:
        raise RuntimeError(f"session create failed: {status} {sess}")
    write_ms, ids, returned_at = [], [], {}
    cpu_before = servers.cpu_seconds()
    t_start = time.perf_counter()
    wall_start = datetime.now(UTC)
    for s in range(0, len(messages), batch):
        body = {
            "messages": [
                {"content": m, "speaker": "bench"} for m in messages[s : s + batch]
            ]
        }
        t0 = time.perf_counter()
        status, out = c.post(f"/api/v1/sessions/{sess['id']}/messages", body)
        write_ms.append((time.perf_counter() - t0) * 1000)
        if status != 201:
            raise RuntimeError(f"write failed: {status} {str(out)[:200]}")
        now = datetime.now(UTC)
        for item in out["items"]:
            ids.append(item["id"])
            returned_at[item["id"]] = now
    c.close()
    deadline = time.monotonic() + timeout_s
    ready = 0
    while time.monotonic() < deadline:
        ready = Memory.objects.filter(pk__in=ids, embedding_state="ready").count()
        if ready == len(ids):
            break
        time.sleep(0.1)
    elapsed = time.perf_counter() - t_start
    cpu_after = servers.cpu_seconds()
    cpu = {n: cpu_after[n] - cpu_before.get(n, 0.0) for n in cpu_after}
    done: dict[int, datetime] = {
        i: at
        for i, at in Memory.objects.filter(
            pk__in=ids, embedded_at__isnull=False
        ).values_list("id", "embedded_at")
        if at is not None
    }
    visible = [(done[i] - returned_at[i]).total_seconds() for i in ids if i in done]
    last = max(done.values()) if done else None
    end_to_end = (last - wall_start).total_seconds() if last else elapsed
    return {
        "messages": len(ids),
        "batch": batch,
        "ready": ready,
        "messages_per_s": round(ready / max(end_to_end, 1e-9), 1),
        "seconds": round(end_to_end, 2),
        "write_ms": percentiles(write_ms),
        "write_ms_each": [round(ms, 1) for ms in write_ms],  # in POST order
        "visible_s": percentiles(visible),
        # From the first POST to the last row ready (or the timeout): where the two
        # cores went, per message written (docs/benchmarks.md, session 30).
        "cpu_ms_per_message": {
            name: round(used * 1000 / max(1, len(ids)), 3) for name, used in cpu.items()
        },
        "cpu_cores": round(sum(cpu.values()) / max(elapsed, 1e-9), 2),
    }


def filtered_vector_recall(
    principal: Principal,
    vectors: Any,
    *,
    k: int = 10,
    ef_searches: Sequence[int] = (100,),
) -> list[dict[str, Any]]:
    """recall@k of the HNSW channel (as recall uses it) against exact search, at each
    of ``ef_searches``.

    The exact answer does not depend on ``ef_search``: it is computed once a query
    for the whole sweep (at 1M an exact scan of the largest tenant is ~0.2 s), so a
    run can afford enough queries for a figure near the 0.95 line to be stable.
    """
    scope = Scope(
        principal=principal,
        tiers=("raw", "episodic", "semantic", "procedural", "topic"),
    )
    exact_hits = []
    for vec in vectors:
        with transaction.atomic():
            _activate(principal)
            with connection.cursor() as c:
                c.execute("SET LOCAL enable_indexscan = off")
            exact_hits.append(channels.vector_channel(scope, vec, k=k))
    out = []
    for ef_search in ef_searches:
        overlaps, short, lat, empty = [], 0, [], 0
        for vec, exact in zip(vectors, exact_hits, strict=True):
            with transaction.atomic():
                _activate(principal)
                channels.set_vector_search_params(ef_search=ef_search)
                with connection.cursor() as c:  # the sweep may go below the floor
                    c.execute(
                        "SELECT set_config('hnsw.ef_search', %s, true)",
                        [str(ef_search)],
                    )
                t0 = time.perf_counter()
                ann = channels.vector_channel(scope, vec, k=k)
                lat.append((time.perf_counter() - t0) * 1000)
            if len(ann) < len(exact):
                short += 1
            if not exact:
                # The principal sees no row with a vector (at 10k the smallest org's
                # 44 rows are all one team's): nothing to recall, not a miss.
                empty += 1
                continue
            # Tie-aware: a returned row as close as the k-th exact one is a correct
            # answer (duplicate texts have identical vectors, and either copy is right).
            floor = min((h.score for h in exact), default=0.0) - 1e-6
            truth = {h.memory_id for h in exact}
            good = sum(1 for h in ann if h.memory_id in truth or h.score >= floor)
            overlaps.append(min(good, len(exact)) / max(1, len(exact)))
        out.append(
            {
                "queries": len(overlaps),
                "ef_search": ef_search,
                "recall_at_k": (
                    round(sum(overlaps) / len(overlaps), 4) if overlaps else None
                ),
                "short_lists": short,
                "empty_exact": empty,
                "ann_ms": percentiles(lat),
            }
        )
    return out


def sizes() -> dict[str, Any]:
    """Table and index sizes of the memory table (MiB) and the row count."""
    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM memory_memory")
        rows = c.fetchone()[0]
        c.execute(
            "SELECT pg_total_relation_size('memory_memory'), "
            "pg_relation_size('memory_memory'), pg_database_size(current_database())"
        )
        total, heap, db = c.fetchone()
        c.execute(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM "
            "pg_stat_user_indexes WHERE relname = 'memory_memory' ORDER BY 2 DESC"
        )
        idx = {name: round(b / 2**20, 1) for name, b in c.fetchall()}
    per = 100_000 / max(1, rows)
    mib = 2**20
    # Every HNSW (GIN) index of the table: the shared one and the tenants' own.
    hnsw = sum(v for name, v in idx.items() if "hnsw" in name)
    gin = sum(v for name, v in idx.items() if "gin" in name)
    return {
        "rows": rows,
        "database_mib": round(db / mib, 1),
        "memory_total_mib": round(total / mib, 1),
        "memory_heap_mib": round(heap / mib, 1),
        "indexes_mib": idx,
        "hnsw_mib": round(hnsw, 1),
        "gin_mib": round(gin, 1),
        "per_100k_mib": {
            "memory_total": round(total / mib * per, 1),
            "hnsw": round(hnsw * per, 1),
            "gin": round(gin * per, 1),
        },
    }
