"""The three-phase cascade: run channels per phase, fuse, gate on coverage, merge.

Phase 1 reads consolidated rows (facts, procedures, topics); phase 2 episodes and raw
messages with every channel; phase 3 chunks and artifacts with every query variant and
an optional cross-encoder rerank. ``direct`` mode is one phase over everything.
Pure ranking logic lives in ``recall.pipeline``; SQL in ``recall.channels``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from django.conf import settings

from recall import channels
from recall.pipeline.coverage import Coverage, coverage_score, should_exit
from recall.pipeline.fusion import apply_adjustments, fuse_rrf, spread_to_neighbors
from recall.pipeline.graph import best_paths, personalized_pagerank
from recall.pipeline.intent import Intent
from recall.pipeline.packing import head_size
from recall.pipeline.recency import recency_hits
from recall.pipeline.types import ChannelHit, FusedItem
from recall.scope import Scope
from recall.types import (
    PHASE1_QUOTAS,
    PHASE_KINDS,
    PHASE_TIERS,
    Degradation,
    RecallRequest,
)

PHASE_GATES = {1: 0.75, 2: 0.65}
# Phase-1 rows (facts, procedures, topics) join the pack only when their meaning is
# close to the query: RRF ranks of a small phase-1 pool are not comparable with phase 2.
PHASE1_MIN_SCORE = 0.5
GRAPH_TIME_BUDGET_MS = 150.0
GRAPH_FANOUT = 200
GRAPH_MAX_EDGES = 5000


@dataclass
class CascadeState:
    """Everything the cascade learned, for packing and explain."""

    items: dict[int, FusedItem] = field(default_factory=dict)
    hits: dict[int, dict[str, ChannelHit]] = field(default_factory=dict)
    graph_paths: dict[int, tuple[str, ...]] = field(default_factory=dict)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    phase_reached: int = 0
    degradations: list[Degradation] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    # Rows read so far (visibility re-checked), by id: what the coverage gate read
    # is what the packer needs, so it is read once.
    rows: dict[int, Any] = field(default_factory=dict)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.timings[name] = (
                self.timings.get(name, 0.0) + (time.perf_counter() - start) * 1000
            )


@dataclass(frozen=True)
class QueryContext:
    request: RecallRequest
    intent: Intent
    vectors: np.ndarray | None  # row 0: the query; then the variants
    entity_ids: dict[str, int]
    now: datetime
    # Lower-cased speaker names the query names (e.g. "Melanie" in "What do Melanie's
    # kids like?"): their own turns are boosted, and the names are not lexical terms
    # (on conversational data a name matches mostly the *other* party addressing them).
    speakers: frozenset[str] = frozenset()
    # The org's feedback reinforcement weight (0: feedback never touches ranking).
    reinforcement_weight: float = 0.0
    # Phases known to have eligible rows (``phase_scopes`` probed by the caller in
    # the same round trip as its other store facts); None: run_cascade probes.
    present: dict[int, bool] | None = None


def _channel_depth(limit: int, budget_level: str = "mid") -> int:
    """Candidates per channel: fewer at ``budget_level=low``, more at ``high``."""
    if budget_level == "low":
        return max(20, limit)
    if budget_level == "high":
        return max(100, 5 * limit)
    return max(50, 3 * limit)


def run_phase(
    phase: int, scope: Scope, ctx: QueryContext, state: CascadeState
) -> list[FusedItem]:
    """Run the channels of one phase and return its fused, adjusted ranking."""
    req, intent, w = ctx.request, ctx.intent, state.weights
    k = _channel_depth(req.limit, req.budget_level)
    rankings: dict[str, list[ChannelHit]] = {}
    qvec = ctx.vectors[0] if ctx.vectors is not None else None
    # Vector hits below this cosine are not candidates: in a small store a deep vector
    # list reaches rows unrelated to the query, and their RRF share outranked a row
    # found first by one channel (docs/benchmarks.md, "vector floor").
    floor = settings.MNEMO_RECALL_VECTOR_MIN_SCORE or None

    def add(name: str, hits: list[ChannelHit]) -> None:
        if hits:
            rankings[name] = hits

    if w.get("vector", 0) > 0 and qvec is not None:
        min_score = PHASE1_MIN_SCORE if phase == 1 else floor
        add(
            "vector",
            state.timed(
                f"p{phase}.vector",
                lambda: channels.vector_channel(
                    scope, qvec, k=k if phase != 1 else 40, min_score=min_score
                ),
            ),
        )
    # Phase 1 keeps only rows its vector channel found (below): with no vector hit
    # the lexical channel's rows would all be dropped, so it does not run. In the
    # bench's load two recalls in three found no fact that close (docs/benchmarks.md,
    # session 21).
    vector_gated = phase == 1 and qvec is not None and w.get("vector", 0) > 0
    if w.get("lexical", 0) > 0 and not (vector_gated and "vector" not in rankings):
        add(
            "lexical",
            state.timed(
                f"p{phase}.lexical",
                lambda: channels.lexical_channel(scope, lexical_terms(ctx), k=k),
            ),
        )
    if phase == 3 and ctx.vectors is not None and len(ctx.vectors) > 1:
        for i, variant in enumerate(intent.variants, start=1):
            if w.get("vector", 0) > 0 and i < len(ctx.vectors):
                add(
                    f"vector:v{i}",
                    state.timed(
                        f"p3.vector_v{i}",
                        partial(
                            channels.vector_channel,
                            scope,
                            ctx.vectors[i],
                            k=k,
                            channel=f"vector:v{i}",
                            min_score=floor,
                        ),
                    ),
                )
            if w.get("lexical", 0) > 0:
                add(
                    f"lexical:v{i}",
                    state.timed(
                        f"p3.lexical_v{i}",
                        partial(
                            channels.lexical_channel,
                            scope,
                            variant.split(),
                            k=k,
                            channel=f"lexical:v{i}",
                        ),
                    ),
                )
    if phase != 1 and intent.window is not None and w.get("temporal", 0) > 0:
        add(
            "temporal",
            state.timed(
                f"p{phase}.temporal",
                lambda: channels.temporal_channel(
                    scope, qvec, intent.window, k=k, min_score=floor
                ),
            ),
        )
    if phase != 1 and ctx.entity_ids and w.get("graph", 0) > 0 and rankings:
        pool = {h.memory_id for hits in rankings.values() for h in hits}
        add(
            "graph",
            state.timed(f"p{phase}.graph", lambda: _graph(scope, ctx, state, k, pool)),
        )
    if w.get("recency", 0) > 0 and rankings:
        pool = {h.memory_id for hits in rankings.values() for h in hits}
        times = channels_occurred(pool)
        add("recency", recency_hits(times.items(), now=ctx.now))

    weights = {name: w.get(name.split(":")[0], 1.0) for name in rankings}
    fused = state.timed(
        f"p{phase}.fusion", lambda: fuse_rrf(rankings, weights, phase=phase)
    )
    for name, hits in rankings.items():
        for h in hits:
            state.hits.setdefault(h.memory_id, {})[name] = h
    if phase == 1:
        if vector_gated:
            vector_ok = {h.memory_id for h in rankings.get("vector", [])}
            fused = [f for f in fused if f.memory_id in vector_ok]
        fused = _phase1_quotas(fused, scope, state)
    if phase != 1 and req.window_boost != 1.0 and "temporal" in rankings and fused:
        inside = {h.memory_id for h in rankings["temporal"]}
        fused = apply_adjustments(
            fused,
            multipliers={
                f.memory_id: {"window": req.window_boost}
                for f in fused
                if f.memory_id in inside
            },
        )
    if phase != 1 and ctx.speakers and req.speaker_boost != 1.0 and fused:
        fused = state.timed(f"p{phase}.speaker", lambda: _speaker_boost(fused, ctx))
    if phase == 2 and req.neighbor_share > 0 and fused:
        top = [f.memory_id for f in fused[: 2 * k]]
        neighbors = state.timed(
            "p2.neighbors", lambda: channels.neighbor_ids(scope, top)
        )
        fused = spread_to_neighbors(
            fused, neighbors, share=req.neighbor_share, max_sources=2 * k
        )
    return _adjust(fused, scope, ctx)


def lexical_terms(ctx: QueryContext) -> tuple[str, ...]:
    """The query's keywords for full text, without the speaker names it asks about."""
    keywords = ctx.intent.keywords or (ctx.intent.query,)
    if ctx.speakers and ctx.request.speaker_boost != 1.0:
        kept = tuple(k for k in keywords if k.lower() not in ctx.speakers)
        return kept or keywords
    return keywords


def _speaker_boost(fused: list[FusedItem], ctx: QueryContext) -> list[FusedItem]:
    """Rows spoken by a speaker the query names take ``speaker_boost``."""
    speaker = channels.speakers_of([f.memory_id for f in fused])
    factor = ctx.request.speaker_boost
    multipliers = {
        mid: {"speaker": factor}
        for mid, name in speaker.items()
        if name in ctx.speakers
    }
    return apply_adjustments(fused, multipliers=multipliers) if multipliers else fused


def channels_occurred(ids: set[int]) -> dict[int, datetime | None]:
    from memory.models import Memory

    return dict(Memory.objects.filter(pk__in=ids).values_list("id", "occurred_at"))


def _phase1_quotas(
    fused: list[FusedItem], scope: Scope, state: CascadeState
) -> list[FusedItem]:
    """Top-20 facts, 10 procedures, 5 topics (per kind quotas).

    The rows are read into the recall's row cache: the coverage read and the packer
    want the same rows next, so this is the only round trip for them.
    """
    ids = [f.memory_id for f in fused]
    state.rows.update(
        channels.read_rows(scope.principal, [i for i in ids if i not in state.rows])
    )
    kinds = {i: state.rows[i].kind for i in ids if i in state.rows}
    taken: dict[str, int] = {}
    kept = []
    for item in fused:
        kind = kinds.get(item.memory_id, "")
        if taken.get(kind, 0) < PHASE1_QUOTAS.get(kind, 10):
            taken[kind] = taken.get(kind, 0) + 1
            kept.append(item)
    return kept


def _adjust(fused: list[FusedItem], scope: Scope, ctx: QueryContext) -> list[FusedItem]:
    """Stale rows (returned in as_of / known_at views) take the 0.5x penalty; when
    the org's reinforcement weight is above 0, reinforced rows get a boost."""
    from recall.feedback import reinforcement_multipliers

    multipliers: dict[int, dict[str, float]] = {}
    org_id = scope.principal.org_id
    if fused and org_id is not None and ctx.reinforcement_weight > 0:
        multipliers = reinforcement_multipliers(org_id, [f.memory_id for f in fused])
    if scope.as_of is not None or scope.known_at is not None:
        from memory.models import Memory

        stale = set(
            Memory.objects.filter(pk__in=[f.memory_id for f in fused])
            .exclude(status="active")
            .values_list("id", flat=True)
        )
        for i in stale:
            multipliers.setdefault(i, {})["stale"] = 0.5
    if not multipliers:
        return fused
    return apply_adjustments(fused, multipliers=multipliers)


def _graph(
    scope: Scope, ctx: QueryContext, state: CascadeState, k: int, pool: set[int]
) -> list[ChannelHit]:
    """Personalised PageRank from the query entities, over the other channels' pool.

    The graph re-ranks candidates the text channels found (it does not add rows of its
    own: on conversational data an entity touches hundreds of turns, and ranking those
    by graph mass alone is noise). Degrades when over its time or fan-out budget.
    """
    started = time.perf_counter()
    seeds = sorted(set(ctx.entity_ids.values()))
    edges = channels.graph_edges(
        scope, seeds, fanout=GRAPH_FANOUT, max_edges=GRAPH_MAX_EDGES
    )
    if (time.perf_counter() - started) * 1000 > GRAPH_TIME_BUDGET_MS or len(
        edges
    ) >= GRAPH_MAX_EDGES:
        state.degradations.append(
            Degradation(
                "graph_budget",
                "graph",
                f"graph channel over its budget ({len(edges)} edges); partial graph",
            )
        )
    if not edges:
        return []
    seed_nodes = {f"e:{s}": 1.0 for s in seeds}
    scores = personalized_pagerank(
        edges, seed_nodes, damping=0.85, max_iter=30, max_fanout=50
    )
    ranked = sorted(
        (
            (node, s)
            for node, s in scores.items()
            if node.startswith("m:") and int(node[2:]) in pool
        ),
        key=lambda pair: (-pair[1], int(pair[0][2:])),
    )[:k]
    paths = best_paths(edges, seed_nodes, [n for n, _ in ranked], max_depth=3)
    hits = []
    for rank, (node, score) in enumerate(ranked, 1):
        mid = int(node[2:])
        path = paths.get(node)
        if path:
            state.graph_paths[mid] = path
        hits.append(ChannelHit("graph", mid, rank, score, {"path": list(path or ())}))
    return hits


def merge_phase(
    state: CascadeState, phase_items: list[FusedItem], strategy: str, phase: int
) -> None:
    for item in phase_items:
        seen = state.items.get(item.memory_id)
        if seen is None or item.score > seen.score:
            state.items[item.memory_id] = item
    if phase > 1 and strategy == "prepend":
        # Phase-1 rows stay ahead of everything found later.
        bump = max((i.score for i in phase_items), default=0.0) + 1.0
        for mid, item in list(state.items.items()):
            if item.phase == 1 and "prepend" not in item.boosts:
                state.items[mid] = replace(
                    item,
                    score=item.score + bump,
                    boosts={**item.boosts, "prepend": 1.0},
                )
    if phase > 1 and strategy == "none":
        for mid in [m for m, i in state.items.items() if i.phase == 1]:
            del state.items[mid]


def phase_coverage(
    items: list[FusedItem],
    ctx: QueryContext,
    state: CascadeState,
    texts: dict[int, str],
    tiers: dict[int, str],
) -> Coverage:
    top = items[: ctx.request.limit]
    scores = []
    for item in top:
        vec = state.hits.get(item.memory_id, {}).get("vector")
        scores.append(vec.score if vec else 0.0)
    return coverage_score(
        facets=list(ctx.intent.keywords) + list(ctx.intent.entities),
        item_texts=[texts.get(i.memory_id, "") for i in top],
        scores=scores,
        tiers=[tiers.get(i.memory_id, "") for i in top],
    )


def phase_scopes(base: Scope, req: RecallRequest) -> dict[int, Scope]:
    """The scope of each cascade phase the request runs (tiers and kinds it allows)."""
    # low: phases 1-2 only (no broadening, no rerank); high: no early exit, so phase 3
    # (every variant, and the cross-encoder when configured) always runs.
    phases = (1, 2) if req.budget_level == "low" else (1, 2, 3)
    scopes: dict[int, Scope] = {}
    for phase in phases:
        tiers = tuple(t for t in PHASE_TIERS[phase] if not req.tiers or t in req.tiers)
        if not tiers:
            continue
        kinds = PHASE_KINDS[phase]
        if req.kinds:
            kinds = tuple(k for k in (kinds or req.kinds) if k in req.kinds)
            if not kinds:
                continue
        scopes[phase] = base.with_tiers(tiers, kinds)
    return scopes


def probed_phases(scopes: dict[int, Scope]) -> list[int]:
    """Phases 1 and 3 read tiers many stores never fill (facts, chunks): one EXISTS
    each (in one round trip) saves their channel queries and phase 3's variant
    embeddings."""
    return [p for p in scopes if p != 2]


def run_cascade(
    base: Scope,
    ctx: QueryContext,
    state: CascadeState,
    describe: Callable[[list[int]], tuple[dict[int, str], dict[int, str]]],
) -> None:
    """Run phases until the coverage gate says the pack is good enough."""
    req = ctx.request
    if req.mode == "direct":
        tiers = req.tiers or ("raw", "episodic", "semantic", "procedural", "topic")
        scope = base.with_tiers(tuple(tiers))
        items = run_phase(2, scope, ctx, state)
        items = [replace(i, phase=0) for i in items]
        merge_phase(state, items, "merge", 0)
        state.phase_reached = 0
        return
    scopes = phase_scopes(base, req)
    present = ctx.present
    if present is None:
        probe = probed_phases(scopes)
        found = state.timed(
            "presence", lambda: channels.any_eligible([scopes[p] for p in probe])
        )
        present = dict(zip(probe, found, strict=True))
    for phase, scope in scopes.items():
        if not present.get(phase, True):
            state.coverage[f"phase{phase}"] = {"skipped": "no eligible rows"}
            continue
        if phase == 3:
            ctx = with_variant_vectors(ctx, state)
        items = run_phase(phase, scope, ctx, state)
        if phase == 3 and items:
            items = rerank(items, ctx, state, describe)
        merge_phase(state, items, req.phase1_strategy, phase)
        state.phase_reached = phase
        if phase == 3:
            break
        ranked = sorted(state.items.values(), key=lambda i: (-i.score, i.memory_id))
        # Read the rows the packer will want too (one round trip serves both).
        texts, tier_of = describe([i.memory_id for i in ranked[: head_size(req.limit)]])
        cov = phase_coverage(ranked, ctx, state, texts, tier_of)
        entry: dict[str, Any] = {
            "value": round(cov.value, 4),
            "facet": round(cov.facet, 4),
            "mean_score": round(cov.mean_score, 4),
            "diversity": round(cov.diversity, 4),
            "gate": PHASE_GATES[phase],
            "items": len(ranked),
        }
        exit_now = should_exit(cov, len(ranked), threshold=PHASE_GATES[phase])
        if exit_now and phase == 1 and ctx.entity_ids:
            drifting = channels.unstable_entities(list(ctx.entity_ids.values()))
            if drifting:
                exit_now = False
                entry["drift_override"] = drifting
        if exit_now and req.budget_level == "high":
            exit_now = False
            entry["exit_skipped"] = "budget_level=high"
        entry["exit"] = exit_now
        state.coverage[f"phase{phase}"] = entry
        if exit_now:
            return


def with_variant_vectors(ctx: QueryContext, state: CascadeState) -> QueryContext:
    """Embed the query variants (phase 3 only) next to the query's own vector."""
    if ctx.vectors is None or len(ctx.vectors) > 1 or not ctx.intent.variants:
        return ctx
    from memory import embeddings

    try:
        extra = state.timed(
            "embed_variants",
            lambda: embeddings.embed_queries(list(ctx.intent.variants)),
        )
    except embeddings.EmbedderUnavailable as exc:
        state.degradations.append(
            Degradation(
                "embedder_unavailable", "vector", f"variants not embedded ({exc})"
            )
        )
        return ctx
    return replace(ctx, vectors=np.vstack([ctx.vectors[:1], extra]))


def rerank(
    items: list[FusedItem],
    ctx: QueryContext,
    state: CascadeState,
    describe: Callable[[list[int]], tuple[dict[int, str], dict[int, str]]],
) -> list[FusedItem]:
    """Optional cross-encoder rerank of phase 3's top-N; failure keeps RRF order."""
    path = settings.MNEMO_CROSS_ENCODER
    if not path:
        return items
    top_n = 30
    try:
        from recall.rerank import cross_encoder_scores

        head = items[:top_n]
        texts, _ = describe([i.memory_id for i in head])
        scores = state.timed(
            "p3.rerank",
            lambda: cross_encoder_scores(
                path, ctx.request.query, [texts.get(i.memory_id, "") for i in head]
            ),
        )
        reranked = [
            replace(i, score=float(s), boosts={**i.boosts, "rerank": float(s)})
            for i, s in zip(head, scores, strict=True)
        ]
        reranked.sort(key=lambda i: (-i.score, i.memory_id))
        floor = min((i.score for i in reranked), default=0.0)
        rest = [replace(i, score=min(i.score, floor - 1e-6)) for i in items[top_n:]]
        return reranked + rest
    except Exception as exc:  # noqa: BLE001 - any reranker failure degrades, never fails
        state.degradations.append(
            Degradation("reranker_failed", "rerank", str(exc)[:300])
        )
        return items
