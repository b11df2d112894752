"""Assemble the context pack: lanes, relevance gate, altitude, budget, explain.

Order inside the budget: working memory (its own field, counted first), exact
references, the rule overlay, the lesson overlay, then the fused ranking (or, when
nothing cleared the relevance gate, the session's recency fallback). One
``pack_to_budget`` walk packs them all, so the budget, the limit and the rule that
a digest and the rows it covers are never both packed hold across lanes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accounts.principals import Principal
from recall import channels, lanes
from recall.cascade import CascadeState
from recall.channels import MemoryRow
from recall.citations import citations_for, topic_covers
from recall.pipeline.answer_type import answer_type_multipliers
from recall.pipeline.corroboration import corroborate
from recall.pipeline.explain import explain_item
from recall.pipeline.fusion import apply_adjustments
from recall.pipeline.mmr import mmr_dedupe
from recall.pipeline.packing import PackInput, head_size, pack_to_budget
from recall.pipeline.relevance import min_terms_for, relevance_gate
from recall.pipeline.types import FusedItem
from recall.scope import Scope
from recall.types import ContextPack, Degradation, PackedMemory, RecallRequest


@dataclass(frozen=True)
class PackContext:
    """What the packer needs from the cascade run besides its state."""

    base: Scope
    query_vector: np.ndarray | None
    keywords: tuple[str, ...]
    vector_window: bool
    count_tokens: Any
    # Whether any rule / lesson is eligible (probed with the store facts); None:
    # the packer asks.
    overlays: dict[str, bool] | None = None
    # The query's expected answer type (rows holding one take answer_type_boost).
    answer_type: str | None = None


def build_pack(
    principal: Principal, request: RecallRequest, state: CascadeState, pc: PackContext
) -> ContextPack:
    """Turn the cascade's state (and the lanes) into a budget-fitted context pack."""
    cfg = lanes.lane_config()
    min_score = (
        cfg.min_relevance if request.min_relevance is None else request.min_relevance
    )
    gate_on = min_score > 0
    min_terms = min_terms_for(len(channels.query_terms(pc.keywords)))
    controls: dict[str, Any] = {
        "budget_level": request.budget_level,
        "env_tags": list(request.env_tags),
        "relevance": {
            "min_score": min_score,
            "min_lexical_terms": min_terms,
            "gate": gate_on,
        },
    }
    budget = request.budget_tokens
    working = None
    if request.include_working_memory:
        working = lanes.working_memory(principal, request.session, pc.count_tokens)
        if working is not None and working["tokens"] > budget:
            state.degradations.append(
                Degradation(
                    "working_memory_over_budget",
                    "working_memory",
                    f"working state ({working['tokens']} tokens) is over the budget",
                )
            )
            working = None
    budget_left = budget - (working["tokens"] if working else 0)

    references, not_found = lanes.reference_rows(principal, request.reference_ids)
    multipliers = lanes.env_tag_multipliers(list(state.items), request.env_tags, cfg)
    fused_all = list(state.items.values())
    if multipliers:
        fused_all = apply_adjustments(fused_all, multipliers=multipliers)
    ranked = sorted(fused_all, key=lambda i: (-i.score, i.memory_id))
    head = ranked[: head_size(request.limit)]
    rows = hydrate(principal, [i.memory_id for i in head], state.rows)
    head = [i for i in head if i.memory_id in rows]  # hydration re-checks visibility
    boosts = answer_type_multipliers(
        pc.answer_type,
        {i.memory_id: rows[i.memory_id].content for i in head},
        request.answer_type_boost,
    )
    if boosts:
        head = apply_adjustments(head, multipliers=boosts)
    covers = topic_covers([i.memory_id for i in head if _derived(rows[i.memory_id])])
    head = _corroborated(head, rows, covers, request.corroboration_share)
    head = _episodes_below_their_turns(head, rows, covers)
    texts = {mid: m.content for mid, m in rows.items()}
    deduped, dropped = mmr_dedupe(head, texts, lambda_=0.7, jaccard_threshold=0.85)
    reasons: dict[int, str] = {}
    below: list[FusedItem] = []
    if gate_on:
        gate = relevance_gate(
            deduped,
            state.hits,
            min_score=min_score,
            min_terms=min_terms,
            vector_window=pc.vector_window,
            window_factor=request.window_gate_factor,
        )
        deduped, below, reasons = (
            list(gate.kept),
            list(gate.dropped),
            dict(gate.reasons),
        )

    present = pc.overlays
    if present is None:
        present = lanes.overlays_present(pc.base)
    lessons = lanes.lesson_overlay(
        pc.base,
        request,
        pc.query_vector,
        pc.keywords,
        min_terms=min_terms,
        config=cfg,
        min_score=min_score,
        present=present["lesson"],
    )
    rules, rules_capped = lanes.rule_overlay(
        pc.base,
        request,
        budget_tokens=budget,
        count_tokens=pc.count_tokens,
        config=cfg,
        present=present["rule"],
        query_vector=pc.query_vector,
        keywords=pc.keywords,
        min_terms=min_terms,
        min_score=min_score,
    )
    fused, altitude = _altitude(
        request,
        deduped,
        rows,
        pc,
        min_score=min_score,
        min_terms=min_terms,
        budget=budget_left,
    )
    controls["altitude"] = altitude
    no_match = not (fused or lessons or references)
    lane_of: dict[int, str] = {}
    order: list[int] = []

    def take(ids: list[int], lane: str) -> None:
        for mid in ids:
            if mid not in lane_of:
                lane_of[mid] = lane
                order.append(mid)

    fallback = no_match and request.recency_fallback and request.session is not None
    take([r.pk for r in references], "reference")
    if not no_match or fallback:  # an honest no-match pack stays empty
        take(rules, "rule")
    take([m for m, _ in lessons], "lesson")
    if fallback:
        assert request.session is not None
        take(
            lanes.recency_fallback(pc.base, request.session, k=cfg.fallback_items),
            "fallback",
        )
    elif not no_match:
        take([i.memory_id for i in fused], "fused")
    rows.update(hydrate(principal, [m for m in order if m not in rows], state.rows))
    rows.update({r.pk: MemoryRow.of(r) for r in references})
    order = [m for m in order if m in rows]
    covers = topic_covers([m for m in order if rows[m].tier == "topic"])
    result = pack_to_budget(
        [PackInput(m, rows[m].content, frozenset(covers.get(m, ()))) for m in order],
        budget_tokens=budget_left,
        limit=request.limit,
        count_tokens=pc.count_tokens,
    )
    by_id = {i.memory_id: i for i in [*deduped, *fused]}
    scores = dict(lessons)
    citations, cited_in_all = citations_for(
        principal,
        [p.memory_id for p in result.packed],
        rows,
        scores={mid: item.score for mid, item in state.items.items()},
        keywords=pc.keywords,
        max_per_item=request.max_citations,
    )
    items = []
    # Channels that ran in this recall (one pass, not one per packed item).
    used = {name for h in state.hits.values() for name in h}
    for packed in result.packed:
        row, lane = rows[packed.memory_id], lane_of[packed.memory_id]
        item = by_id.get(row.pk) if lane == "fused" else None
        explain = None
        if request.explain:
            explain = _explain(
                state, item, lane, packed.reason, reasons.get(row.pk), used=used
            )
        items.append(
            PackedMemory(
                id=row.pk,
                tier=row.tier,
                kind=row.kind,
                content=row.content,
                occurred_at=row.occurred_at,
                session=row.session_id,
                visibility=row.visibility,
                score=round(item.score if item else scores.get(row.pk, 0.0), 6),
                tokens=packed.tokens,
                phase=item.phase if item else 0,
                citations=citations.get(row.pk, []),
                citations_total=cited_in_all.get(row.pk, 0),
                explain=explain,
                speaker=row.speaker,
                external_ref=row.external_ref,
                lane=lane,
            )
        )
    omitted = [
        {
            "id": o.memory_id,
            "reason": o.reason,
            "tokens": o.tokens,
            "lane": lane_of.get(o.memory_id, "fused"),
        }
        for o in result.omitted
    ]
    omitted += [
        {"id": d, "reason": "duplicate_of", "duplicate_of": k} for d, k in dropped
    ]
    omitted += [{"id": i.memory_id, "reason": "below_relevance"} for i in below]
    omitted += [{"id": m, "reason": "rule_cap", "lane": "rule"} for m in rules_capped]
    controls["lanes"] = {
        lane: sum(1 for i in items if i.lane == lane)
        for lane in ("reference", "rule", "lesson", "fused", "fallback")
    }
    return ContextPack(
        recall_id=None,
        query=request.query,
        items=items,
        omitted=omitted,
        total_tokens=result.total_tokens + (working["tokens"] if working else 0),
        budget_tokens=budget,
        phase_reached=state.phase_reached,
        coverage=state.coverage,
        intent={},
        degradations=[d.as_dict() for d in state.degradations],
        timings_ms={},
        no_match=no_match,
        fallback=fallback,
        not_found=not_found,
        working_memory=working,
        controls=controls,
    )


_NOT_DERIVED = frozenset({"message", "chunk", "artifact"})
_MANY_SOURCES = frozenset({"episode", "topic", "digest"})


def _derived(row: MemoryRow) -> bool:
    return row.kind not in _NOT_DERIVED


def _corroborated(
    head: list[FusedItem],
    rows: dict[int, MemoryRow],
    covers: dict[int, set[int]],
    share: float,
) -> list[FusedItem]:
    """A message whose observations rank too takes a share of their best score
    (``recall.pipeline.corroboration``; boost ``corroborated`` in explain)."""
    # Only raw evidence takes the boost (an observation a fact was drawn from does
    # not: LoCoMo recall@10 0.767 with it, 0.769 without).
    sources = {
        mid: source
        for mid, src in covers.items()
        if len(src) == 1 and rows[mid].kind not in _MANY_SOURCES
        for source in src
        if source in rows and not _derived(rows[source])
    }
    return corroborate(head, sources, share=share)


def _episodes_below_their_turns(
    head: list[FusedItem], rows: dict[int, MemoryRow], covers: dict[int, set[int]]
) -> list[FusedItem]:
    """An episode (a session summary) ranks just below the lowest of its own turns
    that are candidates too: the turns are the evidence, and an episode ranked first
    cites six turns of its session, crowding the turn ranking (LongMemEval with the
    tiers: turn recall_all@5 0.662 -> 0.775; docs/benchmarks.md, session 5). The
    episode stays in the ranking (penalty ``episode_below_turns`` in explain)."""
    episodes = [i for i in head if rows[i.memory_id].kind == "episode"]
    if not episodes:
        return head
    score = {i.memory_id: i.score for i in head}
    multipliers: dict[int, dict[str, float]] = {}
    for item in episodes:
        turns = [score[t] for t in covers.get(item.memory_id, ()) if t in score]
        if turns and item.score > 0 and min(turns) < item.score:
            factor = min(turns) / item.score * 0.999
            multipliers[item.memory_id] = {"episode_below_turns": factor}
    if not multipliers:
        return head
    return apply_adjustments(head, multipliers=multipliers)


def hydrate(
    principal: Principal, ids: list[int], cache: dict[int, MemoryRow] | None = None
) -> dict[int, MemoryRow]:
    """The rows of ``ids`` that ``principal`` may see (one query for those not in
    ``cache``, which is filled in)."""
    cache = {} if cache is None else cache
    missing = [i for i in ids if i not in cache]
    if missing:
        cache.update(channels.read_rows(principal, missing))
    return {i: cache[i] for i in ids if i in cache}


def _altitude(
    request: RecallRequest,
    items: list[FusedItem],
    rows: dict[int, MemoryRow],
    pc: PackContext,
    *,
    min_score: float,
    min_terms: int,
    budget: int,
) -> tuple[list[FusedItem], dict[str, Any]]:
    """Rows, topic digests, or only the digests, as ``request.altitude`` asks.

    ``auto`` keeps the ranking when its first ``limit`` rows fit the budget and
    otherwise climbs to digests: relevant topic rows go first and the packer then
    leaves out the rows they cover.
    """
    mode = request.altitude
    info: dict[str, Any] = {"requested": mode}
    if mode == "auto":
        needed = sum(
            pc.count_tokens(rows[i.memory_id].content) for i in items[: request.limit]
        )
        mode = "rows" if needed <= budget else "digests"
        info["rows_tokens"] = needed
        if mode == "rows":
            info["used"] = "rows"
            return items, info  # the ranking as is
    info["used"] = mode
    if mode == "rows":
        return [i for i in items if rows[i.memory_id].tier != "topic"], info
    topics = {i.memory_id: i for i in items if rows[i.memory_id].tier == "topic"}
    for mid, score in lanes.topic_candidates(
        pc.base, pc.query_vector, pc.keywords, min_score=min_score, min_terms=min_terms
    ):
        topics.setdefault(mid, FusedItem(mid, score, phase=1, boosts={"altitude": 1.0}))
    rows.update(hydrate(pc.base.principal, [m for m in topics if m not in rows]))
    ordered = sorted(
        (t for m, t in topics.items() if m in rows),
        key=lambda i: (-i.score, i.memory_id),
    )
    info["digests"] = len(ordered)
    if mode == "root":
        return ordered, info
    return ordered + [i for i in items if i.memory_id not in topics], info


def _explain(
    state: CascadeState,
    item: FusedItem | None,
    lane: str,
    why: str,
    relevance: str | None,
    *,
    used: set[str],
) -> dict[str, Any]:
    if item is None:
        return {
            "lane": lane,
            "why_packed": why,
            "phase": 0,
            "channels": {},
            "weights": {},
            "boosts": {},
            "penalties": {},
            "graph_path": None,
            "window_match": None,
        }
    hits = state.hits.get(item.memory_id, {})
    explain = explain_item(
        item,
        weights_used=state.weights,
        phase=item.phase,
        window_match=(hits.get("temporal") is not None) if "temporal" in used else None,
        graph_path=state.graph_paths.get(item.memory_id),
        why_packed=why,
        channel_details={name: dict(h.detail) for name, h in hits.items() if h.detail},
    )
    explain["lane"] = lane
    explain["relevance"] = relevance
    return explain
