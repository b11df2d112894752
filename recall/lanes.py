"""Lanes beside the fused channels, and the controls applied around the cascade.

- **reference**: ``reference_ids`` come back byte for byte when visible; the rest are
  listed in ``not_found`` (missing and not-yours give the same answer).
- **rule** overlay: ``kind=rule`` rows the principal may see ride along in every pack,
  ahead of ordinary items, capped in count and in share of the budget.
- **lesson** overlay: ``kind=lesson`` rows of other sessions, by relevance.
- **working memory**: the session's key/value state, counted first in the budget.
- **fallback**: the session's most recent rows when nothing cleared the gate.
- **env_tags**: rows sharing a request tag are boosted, rows whose tags all differ
  take a small penalty.

Every lane reads through ``recall.channels`` (eligibility SQL) or ``visible_to``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.conf import settings

from accounts.principals import Principal
from memory.models import Memory
from recall import channels
from recall.models import WorkingState
from recall.scope import Scope
from recall.types import RecallRequest

EXTRACTED_RULE_MIN_SCORE = 0.5
ALL_TIERS = ("raw", "episodic", "semantic", "procedural", "topic")


@dataclass(frozen=True)
class LaneConfig:
    """Knobs of the lanes (``MNEMO_*`` settings; docs/recall-lanes.md)."""

    min_relevance: float
    rule_max_items: int
    rule_budget_share: float
    lesson_max_items: int
    env_tag_boost: float
    env_tag_penalty: float
    fallback_items: int


def lane_config() -> LaneConfig:
    """Read the lane settings (at call time, never at import)."""
    return LaneConfig(
        min_relevance=float(getattr(settings, "MNEMO_RECALL_MIN_RELEVANCE", 0.3)),
        rule_max_items=int(getattr(settings, "MNEMO_RULE_OVERLAY_MAX_ITEMS", 3)),
        rule_budget_share=float(
            getattr(settings, "MNEMO_RULE_OVERLAY_BUDGET_SHARE", 0.2)
        ),
        lesson_max_items=int(getattr(settings, "MNEMO_LESSON_OVERLAY_MAX_ITEMS", 3)),
        env_tag_boost=float(getattr(settings, "MNEMO_ENV_TAG_BOOST", 1.15)),
        env_tag_penalty=float(getattr(settings, "MNEMO_ENV_TAG_PENALTY", 0.85)),
        fallback_items=int(getattr(settings, "MNEMO_RECENCY_FALLBACK_ITEMS", 5)),
    )


def _wanted(request: RecallRequest, tier: str, kind: str) -> bool:
    """Overlays honour explicit ``tiers`` / ``kinds`` filters of the request."""
    return (not request.tiers or tier in request.tiers) and (
        not request.kinds or kind in request.kinds
    )


def _tags_conflict(row_tags: list[str], request_tags: tuple[str, ...]) -> bool:
    return (
        bool(row_tags) and bool(request_tags) and not set(row_tags) & set(request_tags)
    )


def reference_rows(
    principal: Principal, ids: tuple[int, ...]
) -> tuple[list[Memory], list[int]]:
    """The requested rows the principal may read (in request order), and the rest.

    Visibility and the agent's read scopes apply; status does not (a caller may cite
    a superseded row by id).
    """
    if not ids:
        return [], []
    qs = Memory.objects.visible_to(principal)
    read = principal.read_scopes or {}
    if read.get("tiers"):
        qs = qs.filter(tier__in=read["tiers"])
    if read.get("kinds"):
        qs = qs.filter(kind__in=read["kinds"])
    rows = qs.in_bulk(list(ids))
    wanted = list(dict.fromkeys(ids))
    return [rows[i] for i in wanted if i in rows], [i for i in wanted if i not in rows]


def overlay_scope(base: Scope, kind: str) -> Scope:
    """Where the rule / lesson overlays look: procedural rows of that kind, across
    sessions and time (visibility, read scopes and the view of time still apply)."""
    return replace(
        base,
        tiers=("procedural",),
        kinds=(kind,),
        sessions=None,
        entity_ids=None,
        occurred_after=None,
        occurred_before=None,
    )


def overlays_present(base: Scope) -> dict[str, bool]:
    """Whether any rule / lesson is eligible at all (one round trip for both)."""
    kinds = ("rule", "lesson")
    found = channels.any_eligible([overlay_scope(base, k) for k in kinds])
    return dict(zip(kinds, found, strict=True))


def rule_overlay(
    base: Scope,
    request: RecallRequest,
    *,
    budget_tokens: int,
    count_tokens: Any,
    config: LaneConfig,
    present: bool = True,
    query_vector: np.ndarray | None = None,
    keywords: tuple[str, ...] = (),
    min_terms: int = 1,
    min_score: float = 0.0,
) -> tuple[list[int], list[int]]:
    """Rules that apply: (ids within the cap, ids left out by the cap).

    Session and time filters of the request do not apply (a rule holds across
    sessions); visibility, read scopes and ``as_of`` / ``known_at`` do. Rules whose
    ``env_tags`` all differ from the request's do not apply to this environment.
    A rule someone wrote always applies; a rule consolidation *extracted* from a
    conversation (it has ``derived_from`` lineage) joins only when it is relevant to
    the query, like a lesson: an imperative said in passing is not a standing rule.
    """
    if not request.include_rules or not _wanted(request, "procedural", "rule"):
        return [], []
    scope = overlay_scope(base, "rule")
    if not present:
        return [], []
    ids = [h.memory_id for h in channels.recent_rows(scope, k=50)]
    extracted = _extracted(ids)
    if extracted:
        about = _about(scope, query_vector, keywords)
        ids = [m for m in ids if m not in extracted or m in about]
    rows = Memory.objects.filter(pk__in=ids).only("id", "content", "env_tags")
    by_id = {r.pk: r for r in rows}
    cap = int(budget_tokens * config.rule_budget_share)
    kept: list[int] = []
    capped: list[int] = []
    used = 0
    for mid in ids:
        row = by_id[mid]
        if _tags_conflict(row.env_tags, request.env_tags):
            continue
        tokens = count_tokens(row.content)
        if len(kept) >= config.rule_max_items or used + tokens > cap:
            capped.append(mid)
            continue
        kept.append(mid)
        used += tokens
    return kept, capped


def _extracted(ids: list[int]) -> set[int]:
    """The rows among ``ids`` that consolidation derived (they have lineage)."""
    if not ids:
        return set()
    return set(
        Memory.derived_from.through.objects.filter(from_memory_id__in=ids).values_list(
            "from_memory_id", flat=True
        )
    )


def _about(
    scope: Scope, query_vector: np.ndarray | None, keywords: tuple[str, ...]
) -> set[int]:
    """Extracted rules / lessons about the query: close in meaning (the phase-1 bar,
    :data:`EXTRACTED_RULE_MIN_SCORE`) *and* sharing a query term. Either alone let
    through "Do your research and find an adoption agency" for "Where did Caroline
    move from?" (the speaker's name alone lifts MiniLM similarity past 0.5)."""
    lexical = {h.memory_id for h in channels.lexical_channel(scope, keywords, k=20)}
    if query_vector is None or not lexical:
        return lexical
    close = channels.vector_channel(
        scope, query_vector, k=20, min_score=EXTRACTED_RULE_MIN_SCORE
    )
    return lexical & {h.memory_id for h in close}


def _relevant(
    scope: Scope,
    query_vector: np.ndarray | None,
    keywords: tuple[str, ...],
    *,
    min_terms: int,
    min_score: float,
) -> dict[int, float]:
    """Rows of ``scope`` close to the query: vector score >= ``min_score``, or at
    least ``min_terms`` query terms matched (scored ``min_score``)."""
    scored: dict[int, float] = {}
    if query_vector is not None:
        for h in channels.vector_channel(
            scope, query_vector, k=20, min_score=min_score
        ):
            scored[h.memory_id] = h.score
    for h in channels.lexical_channel(scope, keywords, k=20):
        if h.detail.get("matched_terms", 0) >= min_terms:
            scored.setdefault(h.memory_id, min_score)
    return scored


def lesson_overlay(
    base: Scope,
    request: RecallRequest,
    query_vector: np.ndarray | None,
    keywords: tuple[str, ...],
    *,
    min_terms: int,
    config: LaneConfig,
    min_score: float,
    present: bool = True,
) -> list[tuple[int, float]]:
    """Lessons learned in other sessions that are relevant to the query."""
    if (
        not request.include_lessons
        or request.prefer_current_session
        or not _wanted(request, "procedural", "lesson")
    ):
        return []
    if not present:
        return []
    scope = overlay_scope(base, "lesson")
    scored = _relevant(
        scope, query_vector, keywords, min_terms=min_terms, min_score=min_score
    )
    extracted = _extracted(list(scored))
    if extracted:  # a lesson consolidation inferred must be about the query
        about = _about(scope, query_vector, keywords)
        scored = {m: s for m, s in scored.items() if m not in extracted or m in about}
    if not scored:
        return []
    sessions = dict(
        Memory.objects.filter(pk__in=scored).values_list("id", "session_id")
    )
    ranked = sorted(
        (
            (m, s)
            for m, s in scored.items()
            if request.session is None or sessions.get(m) != request.session
        ),
        key=lambda p: (-p[1], p[0]),
    )
    return ranked[: config.lesson_max_items]


def recency_fallback(base: Scope, session_id: int, *, k: int) -> list[int]:
    """The session's most recent visible raw and episodic rows, newest first."""
    scope = replace(
        base,
        tiers=("raw", "episodic"),
        kinds=None,
        sessions=(session_id,),
        entity_ids=None,
    )
    return [h.memory_id for h in channels.recent_rows(scope, k=k, channel="fallback")]


def working_memory(
    principal: Principal, session_id: int | None, count_tokens: Any
) -> dict[str, Any] | None:
    """The session's working state when the principal may see the session."""
    if session_id is None:
        return None
    from memory.models import Session

    if not Session.objects.visible_to(principal).filter(pk=session_id).exists():
        return None
    state = WorkingState.objects.filter(session_id=session_id).first()
    if state is None or not state.state:
        return None
    text = json.dumps(state.state, sort_keys=True, ensure_ascii=False)
    return {
        "session": session_id,
        "state": state.state,
        "tokens": count_tokens(text),
        "updated_at": state.updated_at.isoformat(),
        "updated_by": state.updated_by,
        "untrusted": True,
    }


def env_tag_multipliers(
    ids: list[int], request_tags: tuple[str, ...], config: LaneConfig
) -> dict[int, dict[str, float]]:
    """``env_tag_match`` boosts and ``env_tag_conflict`` penalties per memory id."""
    if not request_tags or not ids:
        return {}
    wanted = set(request_tags)
    out: dict[int, dict[str, float]] = {}
    for mid, tags in (
        Memory.objects.filter(pk__in=ids)
        .exclude(env_tags=[])
        .values_list("id", "env_tags")
    ):
        if set(tags) & wanted:
            out[mid] = {"env_tag_match": config.env_tag_boost}
        else:
            out[mid] = {"env_tag_conflict": config.env_tag_penalty}
    return out


def topic_candidates(
    base: Scope,
    query_vector: np.ndarray | None,
    keywords: tuple[str, ...],
    *,
    min_score: float,
    min_terms: int,
    k: int = 10,
) -> list[tuple[int, float]]:
    """Topic digests relevant to the query (the altitude lane), best first."""
    scope = replace(base, tiers=("topic",), kinds=None)
    scored: dict[int, float] = {}
    if query_vector is not None:
        for h in channels.vector_channel(scope, query_vector, k=k, min_score=min_score):
            scored[h.memory_id] = h.score
    for h in channels.lexical_channel(scope, keywords, k=k):
        if h.detail.get("matched_terms", 0) >= min_terms:
            scored.setdefault(h.memory_id, min_score)
    return sorted(scored.items(), key=lambda p: (-p[1], p[0]))[:k]
