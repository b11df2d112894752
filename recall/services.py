"""``recall_run``: the one entry point used by REST, UI and evaluation alike."""

from __future__ import annotations

import time
from dataclasses import asdict
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.principals import Principal
from memory import embeddings
from memory.access import visibility_q
from memory.models import Memory
from recall import channels
from recall.cascade import CascadeState, QueryContext, run_cascade
from recall.models import RecallEvent
from recall.pipeline.explain import explain_item
from recall.pipeline.intent import profile_intent
from recall.pipeline.mmr import mmr_dedupe
from recall.pipeline.packing import PackInput, make_token_counter, pack_to_budget
from recall.pipeline.recency import rank_by_weights
from recall.scope import Scope
from recall.types import (
    DEFAULT_WEIGHTS,
    ContextPack,
    Degradation,
    PackedMemory,
    RecallRequest,
    RecallUnavailable,
)

CITATION_DEPTH = 4


@lru_cache(maxsize=4)
def _counter(name: str) -> Any:
    return make_token_counter(name)


def count_tokens(text: str) -> int:
    return int(_counter(settings.MNEMO_TOKENIZER)(text))


def _weights(req: RecallRequest) -> dict[str, float]:
    weights = dict(DEFAULT_WEIGHTS)
    weights["recency"] = rank_by_weights(req.rank_by).get("recency", 0.0)
    for name, value in req.weights.items():
        weights[name] = float(value)
    return weights


def recall_run(principal: Principal, request: RecallRequest) -> ContextPack:
    """Recall a ranked, budget-fitted context pack for ``request`` as ``principal``."""
    started = time.perf_counter()
    state = CascadeState(weights=_weights(request))
    now = timezone.now()
    reference = request.reference_time or now
    intent = state.timed("intent", lambda: profile_intent(
        request.query, reference_time=reference, variant_styles=request.variant_styles))
    base = Scope(
        principal=principal, tiers=("raw", "episodic", "semantic", "procedural", "topic"),
        kinds=request.kinds, sessions=request.sessions, occurred_after=request.occurred_after,
        occurred_before=request.occurred_before, as_of=request.as_of,
        known_at=request.known_at,
    )
    vectors = None
    needs_vectors = state.weights.get("vector", 0) > 0 or (
        intent.window is not None and state.weights.get("temporal", 0) > 0)
    if needs_vectors:
        try:
            vectors = state.timed("embed", lambda: embeddings.embed_queries(
                [request.query, *intent.variants]))
        except embeddings.EmbedderUnavailable as exc:
            _degrade(state, request, Degradation(
                "embedder_unavailable", "vector",
                f"embedding model unavailable ({exc}); vector and temporal channels "
                "skipped, lexical results only"))
    with transaction.atomic():
        channels.set_vector_search_params(ef_search=max(100, 2 * request.limit))
        names = list(intent.entities) + list(request.entities or ())
        candidates = set(names) | set(intent.keywords)
        entity_ids = state.timed("entities", lambda: channels.find_entities(
            base, list(candidates)))
        if request.entities:
            wanted = [n.lower() for n in request.entities]
            ids = tuple(v for k, v in entity_ids.items() if k in wanted)
            base = Scope(**{**base.__dict__, "entity_ids": ids or (-1,)})
        if vectors is not None and state.weights.get("vector", 0) > 0:
            pending = channels.pending_count(base)
            if pending:
                _degrade(state, request, Degradation(
                    "vector_pending", "vector",
                    f"{pending} eligible rows are not embedded yet; vector recall cannot "
                    "see them (lexical can)"))
        ctx = QueryContext(request, intent, vectors, entity_ids, now)
        run_cascade(base, ctx, state, lambda ids: _describe(ids))
        pack = state.timed("pack", lambda: _pack(principal, request, state))
    state.timings["total"] = (time.perf_counter() - started) * 1000
    pack.intent = {
        "entities": list(intent.entities),
        "matched_entities": sorted(entity_ids),
        "window": None if intent.window is None else {
            "start": intent.window.start.isoformat(), "end": intent.window.end.isoformat(),
            "granularity": intent.window.granularity, "phrase": intent.window.phrase},
        "answer_type": intent.answer_type,
        "keywords": list(intent.keywords),
        "variants": list(intent.variants),
        "reference_time": reference.isoformat(),
    }
    pack.timings_ms = {k: round(v, 2) for k, v in state.timings.items()}
    if request.record_event:
        event = RecallEvent.objects.create(
            org_id=principal.org_id, principal=principal.label, query=request.query,
            params=_params(request), item_ids=[i.id for i in pack.items],
            omitted_ids=[o["id"] for o in pack.omitted], phase_reached=pack.phase_reached,
            coverage=pack.coverage, timings_ms=pack.timings_ms,
            total_tokens=pack.total_tokens, degradations=pack.degradations,
        )
        pack.recall_id = event.pk
    return pack


def _degrade(state: CascadeState, request: RecallRequest, d: Degradation) -> None:
    if request.strict:
        raise RecallUnavailable(d)
    state.degradations.append(d)


def _params(request: RecallRequest) -> dict[str, Any]:
    out = {}
    for key, value in asdict(request).items():
        if key == "query":
            continue
        out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return out


def _describe(ids: list[int]) -> tuple[dict[int, str], dict[int, str]]:
    rows = Memory.objects.filter(pk__in=ids).values_list("id", "content", "tier")
    return {i: c for i, c, _ in rows}, {i: t for i, _, t in rows}


def _pack(principal: Principal, request: RecallRequest, state: CascadeState) -> ContextPack:
    ranked = sorted(state.items.values(), key=lambda i: (-i.score, i.memory_id))
    head = ranked[: max(request.limit * 3, 30)]
    rows = {
        m.pk: m for m in Memory.objects.filter(visibility_q(principal),
                                               pk__in=[i.memory_id for i in head])
        .only("id", "tier", "kind", "content", "occurred_at", "session_id", "visibility",
              "speaker", "external_ref", "org_id", "status")
    }
    head = [i for i in head if i.memory_id in rows]  # hydration re-checks visibility
    texts = {mid: m.content for mid, m in rows.items()}
    deduped, dropped = mmr_dedupe(head, texts, lambda_=0.7, jaccard_threshold=0.85)
    covers = _topic_covers([i.memory_id for i in deduped if rows[i.memory_id].tier == "topic"])
    result = pack_to_budget(
        [PackInput(i.memory_id, texts[i.memory_id], frozenset(covers.get(i.memory_id, ())))
         for i in deduped],
        budget_tokens=request.budget_tokens, limit=request.limit, count_tokens=count_tokens,
    )
    by_id = {i.memory_id: i for i in deduped}
    citations = _citations(principal, [p.memory_id for p in result.packed], rows)
    items = []
    for packed in result.packed:
        item, row = by_id[packed.memory_id], rows[packed.memory_id]
        explain = None
        if request.explain:
            hits = state.hits.get(item.memory_id, {})
            window = hits.get("temporal")
            explain = explain_item(
                item, weights_used=state.weights, phase=item.phase,
                window_match=(window is not None) if "temporal" in _used(state) else None,
                graph_path=state.graph_paths.get(item.memory_id),
                why_packed=packed.reason,
                channel_details={name: dict(h.detail) for name, h in hits.items() if h.detail},
            )
        items.append(PackedMemory(
            id=row.pk, tier=row.tier, kind=row.kind, content=row.content,
            occurred_at=row.occurred_at, session=row.session_id, visibility=row.visibility,
            score=round(item.score, 6), tokens=packed.tokens, phase=item.phase,
            citations=citations.get(row.pk, []), explain=explain, speaker=row.speaker,
            external_ref=row.external_ref,
        ))
    omitted = [{"id": o.memory_id, "reason": o.reason, "tokens": o.tokens}
               for o in result.omitted]
    omitted += [{"id": d, "reason": "duplicate_of", "duplicate_of": k} for d, k in dropped]
    return ContextPack(
        recall_id=None, query=request.query, items=items, omitted=omitted,
        total_tokens=result.total_tokens, budget_tokens=request.budget_tokens,
        phase_reached=state.phase_reached, coverage=state.coverage, intent={},
        degradations=[d.as_dict() for d in state.degradations], timings_ms={},
    )


def _used(state: CascadeState) -> set[str]:
    return {name for hits in state.hits.values() for name in hits}


def _topic_covers(topic_ids: list[int]) -> dict[int, set[int]]:
    if not topic_ids:
        return {}
    through = Memory.derived_from.through
    out: dict[int, set[int]] = {}
    for src, dst in through.objects.filter(from_memory_id__in=topic_ids).values_list(
        "from_memory_id", "to_memory_id"
    ):
        out.setdefault(src, set()).add(dst)
    return out


def _citations(principal: Principal, ids: list[int], rows: dict[int, Memory]
               ) -> dict[int, list[dict[str, Any]]]:
    """Raw evidence each item traces to (itself for raw rows), visible rows only."""
    through = Memory.derived_from.through
    roots: dict[int, set[int]] = {}
    frontier: dict[int, set[int]] = {}
    for mid in ids:
        if rows[mid].tier == "raw":
            roots[mid] = {mid}
        else:
            frontier[mid] = {mid}
            roots[mid] = set()
    for _ in range(CITATION_DEPTH):
        current = {n for nodes in frontier.values() for n in nodes}
        if not current:
            break
        edges: dict[int, list[int]] = {}
        for src, dst in through.objects.filter(from_memory_id__in=current).values_list(
            "from_memory_id", "to_memory_id"
        ):
            edges.setdefault(src, []).append(dst)
        nxt_ids = {d for ds in edges.values() for d in ds}
        tiers = dict(Memory.objects.filter(pk__in=nxt_ids).values_list("id", "tier"))
        new_frontier: dict[int, set[int]] = {}
        for item, nodes in frontier.items():
            for n in nodes:
                for d in edges.get(n, []):
                    if tiers.get(d) == "raw":
                        roots[item].add(d)
                    else:
                        new_frontier.setdefault(item, set()).add(d)
        frontier = new_frontier
    all_raw = {r for rs in roots.values() for r in rs}
    raw_rows = {
        m.pk: m for m in Memory.objects.filter(visibility_q(principal), pk__in=all_raw)
        .only("id", "session_id", "occurred_at", "external_ref", "content", "source_span")
    }
    out: dict[int, list[dict[str, Any]]] = {}
    for item, raws in roots.items():
        cites = []
        for rid in sorted(raws, key=lambda r: (raw_rows[r].occurred_at or timezone.now(), r)
                          if r in raw_rows else (timezone.now(), r)):
            raw = raw_rows.get(rid)
            if raw is None:
                continue  # evidence the principal may not see is never cited
            span = rows[item].source_span if item != rid else None
            cites.append({
                "id": raw.pk, "session": raw.session_id,
                "occurred_at": raw.occurred_at.isoformat() if raw.occurred_at else None,
                "external_ref": raw.external_ref,
                "quote": span or {"start": 0, "end": len(raw.content)},
            })
        out[item] = cites
    return out
