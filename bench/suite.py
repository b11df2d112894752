"""One benchmark run at one corpus size, against the database this process uses."""

from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from accounts.models import Agent
from accounts.principals import Principal
from bench import loader, runs, servers
from bench.corpus import (
    CorpusGenerator,
    load_vocabulary,
    sample_queries,
    small_and_large_org,
)
from bench.vectors import WordVectors
from memory import embeddings, vector_indexes
from memory.models import EmbeddingState, Memory, Tier
from recall import term_stats

BROKER = os.environ.get("MNEMO_BENCH_BROKER", "redis://127.0.0.1:6379/12")


@dataclass(frozen=True)
class Options:
    size: int
    seed: int = 42
    queries: int = 200
    real_rows: int = 2000
    vocabulary: int = 6000
    load_clients: int = 20
    load_seconds: float = 60.0
    # Load runs at these fixed offered rates (recalls a second) after the closed-loop
    # one: the latency at a given throughput, where the closed loop gives capacity.
    load_rates: tuple[float, ...] = (80.0, 100.0)
    ingest_messages: int = 300
    # A longer ingest after the first has settled: it outlasts consolidation's
    # debounce, so the observations consolidation derives are embedded alongside.
    ingest_sustained_messages: int = 2000
    recall_checks: int = 200
    # 200 and 800 are what recall uses (a tenant index under / over 100k rows).
    ef_search_sweep: tuple[int, ...] = (40, 100, 200, 400, 800)
    http: bool = True
    web_workers: int = 2
    ingest_timeout_s: float = 120.0
    modes: tuple[str, ...] = ("cascade", "direct")


def vocab_path() -> Path:
    return Path(embeddings.model_path()) / "vocab.txt"


def cache_dir() -> Path:
    return Path(settings.VAR_DIR) / "bench-cache"


def run_size(opts: Options, log: Any = print) -> dict[str, Any]:
    """Load (or reuse) the corpus, then measure everything; returns the result dict."""
    started = time.perf_counter()
    vocab = load_vocabulary(vocab_path(), size=opts.vocabulary)
    gen = CorpusGenerator(opts.size, vocab, seed=opts.seed)
    rows = list(gen.rows())
    # The corpus stays in this process for query sampling; keep its ~10^5-10^6 objects
    # out of the garbage collector's full scans, which otherwise land inside timings.
    gc.collect()
    gc.freeze()
    result: dict[str, Any] = {
        "size": opts.size,
        "seed": opts.seed,
        "started_at": datetime.now(UTC).isoformat(),
        "backend": settings.MNEMO_EMBEDDING_BACKEND,
        "precision": (
            embeddings.precision()
            if settings.MNEMO_EMBEDDING_BACKEND == "torch"
            else None
        ),
        "machine": _machine(),
    }
    have = loader.existing_rows()
    if have == len(rows):
        log(f"reusing the loaded corpus ({have} rows)")
        _, _, agent_ids = loader.ensure_principals(gen)
        result["corpus_load"] = {"reused": True}
    else:
        if have:
            raise SystemExit(
                f"database holds {have} bench rows, not {len(rows)}: use a "
                "fresh MNEMO_DB_NAME per size"
            )
        names = [
            *vocab,
            *{n for o in gen.orgs for n in (*o.people, *o.projects, *o.places)},
        ]
        t0 = time.perf_counter()
        wordvecs = WordVectors(names, cache_dir())
        wv_s = time.perf_counter() - t0
        with loader.owner():
            loaded = loader.load(
                gen, rows, real=opts.real_rows, wordvecs=wordvecs, log=log
            )
        agent_ids = loaded.agent_ids
        result["corpus_load"] = {
            "reused": False,
            "rows": loaded.rows,
            "real_rows": loaded.real_rows,
            "word_vectors_s": round(wv_s, 2),
            "timings_s": loaded.timings_s,
            "rows_per_s": round(loaded.rows / max(1e-9, loaded.timings_s["total"]), 1),
        }
        log(f"loaded {loaded.rows} rows in {loaded.timings_s['total']:.1f}s")
    # Large tenants get partial HNSW indexes, as the beat task gives a live install
    # (memory/vector_indexes.py); idempotent on a reused corpus.
    t0 = time.perf_counter()
    built = vector_indexes.sync_tenant_indexes()
    result["tenant_indexes"] = {
        "min_rows": settings.MNEMO_TENANT_HNSW_MIN_ROWS,
        "orgs": sorted(o for o, _ in [*built.create, *built.keep]),
        "built_s": built.built_s,
        # The shared HNSW index, over the orgs without their own (or every row).
        "shared": (
            "none"
            if built.shared_after is None
            else f"leaves out {len(built.shared_after)} orgs"
        ),
        "shared_built_s": built.shared_built_s,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    log(f"tenant HNSW indexes: {result['tenant_indexes']}")
    # And term statistics for the lexical channel, as the hourly beat task gives them.
    t0 = time.perf_counter()
    counted = term_stats.refresh()
    result["term_stats"] = {
        "min_rows": settings.MNEMO_TERM_STATS_MIN_ROWS,
        "orgs": len(counted),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    log(f"term statistics: {result['term_stats']}")
    # Warm caches, as the targets say (and as a live install's hot data is).
    with loader.owner():
        result["prewarm"] = loader.prewarm()
    log(f"prewarmed: {result['prewarm']}")
    # Distinct questions per mode: a mode must not profit from the query-embedding
    # cache warmed by another.
    questions = {
        mode: sample_queries(rows, gen.orgs, opts.queries + 10, seed=opts.seed + 1 + i)
        for i, mode in enumerate(opts.modes)
    }
    orgs = {o for qs in questions.values() for o, _ in qs}
    agents = {o: Agent.objects.get(pk=agent_ids[o][1]) for o in orgs}
    principals = {o: Principal.for_agent(a) for o, a in agents.items()}
    result["recall_service"] = {}
    for mode in opts.modes:
        jobs = [(principals[o], q) for o, q in questions[mode]]
        log(f"recall_run, {mode} mode, {len(jobs) - 5} queries")
        result["recall_service"][mode] = runs.recall_direct(jobs, mode=mode)
    result["filtered_vector_search"] = _filtered(opts, gen, rows, agent_ids)
    result["sizes"] = runs.sizes()
    if opts.http:
        result.update(_http_part(opts, gen, rows, questions, agents, log))
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _filtered(
    opts: Options,
    gen: CorpusGenerator,
    rows: list[Any],
    agent_ids: dict[int, list[int]],
) -> dict[str, Any]:
    small, large = small_and_large_org(opts.size)
    # And the smallest org: under the tenant-index line at every size, so the one
    # the shared HNSW index (or an exact scan) serves.
    smallest = min(range(len(gen.orgs)), key=lambda i: gen.orgs[i].n_rows)
    rng = random.Random(opts.seed + 2)
    out: dict[str, Any] = {}
    for label, org in (("small", small), ("large", large), ("smallest", smallest)):
        principal = Principal.for_agent(Agent.objects.get(pk=agent_ids[org][0]))
        texts = [r.content for r in rng.sample(rows, opts.recall_checks)]
        vecs = embeddings.embed_queries(texts)
        share = gen.orgs[org].n_rows / opts.size
        out[label] = {
            "org_share": round(share, 4),
            "rows": gen.orgs[org].n_rows,
            "by_ef_search": runs.filtered_vector_recall(
                principal, vecs, ef_searches=opts.ef_search_sweep
            ),
        }
    return out


def _http_part(
    opts: Options,
    gen: CorpusGenerator,
    rows: list[Any],
    questions: dict[str, list[tuple[int, str]]],
    agents: dict[int, Agent],
    log: Any,
) -> dict[str, Any]:
    keys = {o: loader.issue_key(a.pk) for o, a in agents.items()}
    jobs = {mode: [(keys[o], q) for o, q in qs] for mode, qs in questions.items()}
    out: dict[str, Any] = {"recall_http": {}}
    logs = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    # Ingest writes into a scratch org, dropped after the servers stop: rows added to
    # a corpus org (and what consolidation derives from them) changed what later runs'
    # recalls read. The bench's broker database is emptied on both sides, so no task
    # outlives its run.
    _purge_broker()
    with (
        loader.scratch_org("ingest") as (ingest_scratch, ingest_key),
        servers.running(
            broker=BROKER, worker=True, log_dir=logs, web_workers=opts.web_workers
        ) as srv,
    ):
        for mode in opts.modes:
            log(f"HTTP recall, {mode} mode")
            out["recall_http"][mode] = runs.recall_http(srv, jobs[mode], mode=mode)
        if opts.load_seconds > 0:
            log(f"sustained load: {opts.load_clients} clients for {opts.load_seconds}s")
            fresh = sample_queries(rows, gen.orgs, 2000, seed=opts.seed + 99)
            load_jobs = [(keys[o], q) for o, q in fresh if o in keys]
            out["load"] = _loadgen(srv, load_jobs, opts)
            out["load_paced"] = []
            for rate in opts.load_rates:
                log(
                    f"paced load: {opts.load_clients} clients, "
                    f"{rate:g} recalls/s offered for {opts.load_seconds}s"
                )
                out["load_paced"].append(_loadgen(srv, load_jobs, opts, rate=rate))
        ingest_org = min(agents)
        texts = [
            gen._message(gen.orgs[ingest_org], random.Random(i))[0]
            for i in range(opts.ingest_messages)
        ]
        log(f"ingest: {len(texts)} messages over HTTP (into a scratch org)")
        out["ingest"] = runs.ingest_http(
            srv, ingest_key, texts, timeout_s=opts.ingest_timeout_s
        )
        if opts.ingest_sustained_messages > 0:
            _settle(ingest_scratch, timeout_s=opts.ingest_timeout_s)
            derived = _derived_rows(ingest_scratch)
            texts = [
                gen._message(gen.orgs[ingest_org], random.Random(50_000 + i))[0]
                for i in range(opts.ingest_sustained_messages)
            ]
            log(f"sustained ingest: {len(texts)} messages over HTTP")
            out["ingest_sustained"] = runs.ingest_http(
                srv, ingest_key, texts, timeout_s=opts.ingest_timeout_s
            )
            # Rows consolidation derived and embedded while the messages went in.
            out["ingest_sustained"]["derived_rows"] = (
                _derived_rows(ingest_scratch) - derived
            )
        out["peak_rss_mib"] = {name: p.peak_rss_mb() for name, p in srv.procs.items()}
    _purge_broker()
    out["peak_rss_mib"]["bench_process"] = _self_rss()
    out["model_throughput"] = runs.model_throughput(
        [gen._message(gen.orgs[0], random.Random(10_000 + i))[0] for i in range(512)]
    )
    return out


def _derived_rows(org: Any) -> int:
    """Embedded rows of ``org`` that are not messages (consolidation's)."""
    return (
        Memory.objects.filter(org=org, embedding_state=EmbeddingState.READY)
        .exclude(tier=Tier.RAW)
        .count()
    )


def _settle(org: Any, *, timeout_s: float) -> None:
    """Wait out the debounced consolidation of what ``org`` was sent, and the
    embedding of what it derived, so the next measurement starts from quiet."""
    time.sleep(settings.MNEMO_CONSOLIDATION_DELAY_S + 1.0)
    deadline = time.monotonic() + timeout_s
    quiet = 0  # two checks in a row: a consolidation still writing adds rows
    while quiet < 2 and time.monotonic() < deadline:
        pending = Memory.objects.filter(org=org, embedding_state=EmbeddingState.PENDING)
        quiet = 0 if pending.exists() else quiet + 1
        time.sleep(0.5)


def _purge_broker() -> None:
    import redis

    redis.Redis.from_url(BROKER).flushdb()


def _loadgen(
    srv: servers.Servers,
    jobs: list[tuple[str, str]],
    opts: Options,
    *,
    rate: float | None = None,
) -> dict[str, Any]:
    spec = {
        "host": srv.host,
        "port": srv.port,
        "clients": opts.load_clients,
        "seconds": opts.load_seconds,
        "jobs": jobs,
        "rate": rate,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        proc = subprocess.run(  # noqa: S603 - our own module, loopback only
            [sys.executable, "-m", "bench.loadgen", f.name],
            capture_output=True,
            text=True,
            timeout=opts.load_seconds + 120,
            cwd=settings.BASE_DIR,
            check=True,
        )
    finally:
        os.unlink(f.name)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _self_rss() -> float:
    from bench.stats import peak_rss_mb

    return peak_rss_mb(os.getpid()) or 0.0


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
