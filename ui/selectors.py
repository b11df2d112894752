"""Reads for the console. Every query starts from the principal (``visible_to``).

Views call one function here and render what it returns; templates run no queries
beyond following relations already limited here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import Count, F, Prefetch, Q, QuerySet
from django.db.models.functions import Coalesce

from accounts.models import Membership
from accounts.principals import Principal
from memory.access import visibility_q
from memory.models import (
    Conflict,
    EmbeddingState,
    Entity,
    EntityMerge,
    Memory,
    Mention,
    Relationship,
    Session,
    Tier,
)
from memory.services import NotFound, access_memory, access_session
from recall.models import ReviewStatus
from ui.forms import end_of, start_of
from ui.queues import feedback_visible_to

LINEAGE_DEPTH = 6


# --- navigation -----------------------------------------------------------------------


def nav_context(principal: Principal, user: Any) -> dict[str, Any]:
    """Org switcher entries and the queue counts shown in the navigation."""
    memberships = list(
        Membership.objects.filter(user=user).select_related("org").order_by("org__name")
    )
    return {
        "principal": principal,
        "orgs": [m.org for m in memberships],
        "org": next((m.org for m in memberships if m.org_id == principal.org_id), None),
        "open_conflicts": Conflict.objects.visible_to(principal).open().count(),
        "new_feedback": feedback_visible_to(principal)
        .filter(review_status=ReviewStatus.NEW)
        .count(),
        "playground": principal.is_org_admin,
    }


# --- memories -------------------------------------------------------------------------


def memory_search(principal: Principal, filters: dict[str, Any]) -> QuerySet[Memory]:
    """The explorer's result set for cleaned ``MemoryFilterForm`` data."""
    qs = Memory.objects.visible_to(principal).select_related("session")
    for name in ("tier", "kind", "status", "visibility"):
        if filters.get(name):
            qs = qs.filter(**{name: filters[name]})
    if entity := (filters.get("entity") or "").strip():
        qs = qs.filter(mentions__entity__in=_entities_matching(principal, entity))
    if session := (filters.get("session") or "").strip():
        match = Q(session__external_id=session)
        if session.isdigit():
            match |= Q(session_id=int(session))
        qs = qs.filter(match)
    when = Coalesce("occurred_at", "recorded_at")
    if since := start_of(filters.get("since")):
        qs = qs.alias(when=when).filter(when__gte=since)
    if until := end_of(filters.get("until")):
        qs = qs.alias(when=when).filter(when__lte=until)
    if text := (filters.get("q") or "").strip():
        query = SearchQuery(text, config="english", search_type="websearch")
        qs = (
            qs.filter(search=query)
            .annotate(rank=SearchRank(F("search"), query))
            .order_by("-rank", "-recorded_at", "-id")
        )
    else:
        qs = qs.order_by("-recorded_at", "-id")
    if entity:
        qs = qs.distinct()
    return qs


def _entities_matching(principal: Principal, text: str) -> QuerySet[Entity]:
    qs = Entity.objects.filter(org_id=principal.org_id)
    if text.isdigit():
        return qs.filter(pk=int(text))
    norm = text.strip().lower()
    return qs.filter(Q(normalized_name=norm) | Q(aliases__contains=[text.strip()]))


@dataclass
class MemoryDetail:
    """Everything the detail page shows about one memory, already access-filtered."""

    memory: Memory
    derived_from: list[Memory]
    derivations: list[Memory]
    citations: list[Memory]
    older_versions: list[Memory]
    newer_versions: list[Memory]
    entities: list[Entity]
    relationships: list[Relationship]
    conflicts: list[Conflict]
    metadata: list[tuple[str, str]] = field(default_factory=list)


def memory_detail(principal: Principal, memory_id: int) -> MemoryDetail:
    """The detail of a memory the principal may read; ``NotFound`` otherwise."""
    memory = access_memory(principal, memory_id)
    visible = Memory.objects.visible_to(principal)
    derived_from = list(visible.filter(derivations=memory).order_by("seq", "id"))
    derivations = list(visible.filter(derived_from=memory).order_by("id"))
    entities = list(
        Entity.objects.filter(mentions__memory=memory).distinct().order_by("name")
    )
    relationships = list(
        Relationship.objects.visible_to(principal)
        .filter(Q(statement=memory) | Q(evidence=memory))
        .select_related("subject", "object_entity")
        .distinct()
    )
    conflicts = list(
        Conflict.objects.visible_to(principal).filter(alternatives__memory=memory)
    )
    return MemoryDetail(
        memory=memory,
        derived_from=derived_from,
        derivations=derivations,
        citations=[c for c in _citations(principal, memory) if c not in derived_from],
        older_versions=_older_versions(principal, memory),
        newer_versions=_newer_versions(principal, memory),
        entities=entities,
        relationships=relationships,
        conflicts=conflicts,
        metadata=[(str(k), _short(v)) for k, v in sorted(memory.metadata.items())],
    )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 500 else text[:500] + "…"


def _citations(principal: Principal, memory: Memory) -> list[Memory]:
    """The raw rows a memory traces to, walking ``derived_from`` (visible rows only)."""
    if memory.tier == Tier.RAW:
        return []
    visible = Memory.objects.visible_to(principal)
    frontier = {memory.pk}
    seen: set[int] = set(frontier)
    raw: dict[int, Memory] = {}
    for _ in range(LINEAGE_DEPTH):
        parents = list(visible.filter(derivations__in=frontier).distinct())
        frontier = {p.pk for p in parents if p.pk not in seen}
        seen |= frontier
        raw.update({p.pk: p for p in parents if p.tier == Tier.RAW})
        if not frontier:
            break
    return sorted(
        raw.values(), key=lambda m: (m.occurred_at is None, m.occurred_at, m.pk)
    )


def _older_versions(principal: Principal, memory: Memory) -> list[Memory]:
    visible = Memory.objects.visible_to(principal)
    chain: list[Memory] = []
    current = memory
    for _ in range(50):
        previous = visible.filter(superseded_by=current).order_by("-id").first()
        if previous is None:
            break
        chain.append(previous)
        current = previous
    return chain


def _newer_versions(principal: Principal, memory: Memory) -> list[Memory]:
    chain: list[Memory] = []
    current = memory
    for _ in range(50):
        if current.superseded_by_id is None:
            break
        try:
            current = access_memory(principal, current.superseded_by_id)
        except NotFound:
            break
        chain.append(current)
    return chain


# --- sessions -------------------------------------------------------------------------


def session_list(principal: Principal, filters: dict[str, Any]) -> QuerySet[Session]:
    """Visible sessions with their row counts and pending-embedding counts."""
    visible_rows = visibility_q(principal, prefix="memories__")
    qs = Session.objects.visible_to(principal).annotate(
        rows=Count("memories", filter=visible_rows),
        pending=Count(
            "memories",
            filter=visible_rows & Q(memories__embedding_state=EmbeddingState.PENDING),
        ),
    )
    if q := (filters.get("q") or "").strip():
        qs = qs.filter(external_id__icontains=q)
    if filters.get("pending"):
        qs = qs.filter(pending__gt=0)
    return qs.order_by(F("started_at").desc(nulls_last=True), "-created_at", "-id")


@dataclass
class TimelineRow:
    """A message, or a row derived from the session's messages, at its place in time."""

    memory: Memory
    derived: bool
    sources: list[int]


@dataclass
class Timeline:
    session: Session
    rows: list[TimelineRow]
    pending: int
    failed: int
    ready: int

    @property
    def busy(self) -> bool:
        return self.pending > 0


def session_timeline(principal: Principal, session_id: int) -> Timeline:
    """Messages and rows derived from them, in time order; ``NotFound`` if hidden."""
    session = access_session(principal, session_id)
    visible = Memory.objects.visible_to(principal)
    messages = list(visible.filter(session=session).order_by("seq", "id"))
    ids = [m.pk for m in messages]
    derived = list(
        visible.filter(derived_from__in=ids)
        .exclude(session=session)
        .distinct()
        .prefetch_related(
            Prefetch("derived_from", queryset=Memory.objects.only("id"), to_attr="srcs")
        )
    )
    rows = [TimelineRow(m, False, []) for m in messages]
    rows += [TimelineRow(d, True, [s.pk for s in d.srcs]) for d in derived]
    rows.sort(
        key=lambda r: (_when(r.memory), r.derived, r.memory.seq or 0, r.memory.pk)
    )
    states = [r.memory.embedding_state for r in rows]
    return Timeline(
        session=session,
        rows=rows,
        pending=states.count(EmbeddingState.PENDING),
        failed=states.count(EmbeddingState.FAILED),
        ready=states.count(EmbeddingState.READY),
    )


def _when(memory: Memory) -> Any:
    return memory.occurred_at or memory.recorded_at


# --- entities -------------------------------------------------------------------------


def entities_visible_to(principal: Principal) -> QuerySet[Entity]:
    """Entities mentioned by at least one memory the principal may read."""
    visible = Memory.objects.visible_to(principal)
    ids = Mention.objects.filter(memory__in=visible).values("entity_id")
    return Entity.objects.filter(org_id=principal.org_id, pk__in=ids)


def entity_list(principal: Principal, filters: dict[str, Any]) -> QuerySet[Entity]:
    qs = entities_visible_to(principal).filter(merged_into__isnull=True)
    if q := (filters.get("q") or "").strip():
        qs = qs.filter(
            Q(normalized_name__icontains=q.lower()) | Q(aliases__contains=[q])
        )
    return qs.order_by("-mention_count", "name")


def access_entity(principal: Principal, entity_id: int) -> Entity:
    try:
        return entities_visible_to(principal).get(pk=entity_id)
    except (Entity.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("entity not found") from exc


@dataclass
class EntityPage:
    entity: Entity
    facts: list[Memory]
    mentions: list[Memory]
    relationships: list[Relationship]
    co_mentioned: list[tuple[Entity, int]]
    merged: list[EntityMerge]


def entity_page(principal: Principal, entity_id: int) -> EntityPage:
    """Facts, relationships, co-mentions and merge history of a visible entity."""
    entity = access_entity(principal, entity_id)
    visible = Memory.objects.visible_to(principal)
    about = visible.filter(mentions__entity=entity).distinct()
    stated = Q(relationships__subject=entity) | Q(relationships__object_entity=entity)
    facts = list(
        visible.filter(Q(mentions__entity=entity) | stated)
        .filter(tier__in=[Tier.SEMANTIC, Tier.PROCEDURAL, Tier.TOPIC])
        .distinct()
        .order_by("status", "-recorded_at")[:50]
    )
    mentions = list(
        about.filter(tier__in=[Tier.RAW, Tier.EPISODIC]).order_by("-recorded_at")[:25]
    )
    relationships = list(
        Relationship.objects.visible_to(principal)
        .filter(Q(subject=entity) | Q(object_entity=entity))
        .select_related("subject", "object_entity", "statement")
        .order_by("status", "predicate")[:60]
    )
    co = (
        Mention.objects.filter(memory__in=about.values("pk"))
        .exclude(entity=entity)
        .values("entity_id")
        .annotate(n=Count("memory_id", distinct=True))
        .order_by("-n", "entity_id")[:10]
    )
    counts = {row["entity_id"]: row["n"] for row in co}
    others = Entity.objects.in_bulk(list(counts))
    co_mentioned = [(others[i], n) for i, n in counts.items() if i in others]
    merged = list(
        EntityMerge.objects.filter(org_id=principal.org_id)
        .filter(Q(target=entity) | Q(source=entity))
        .select_related("source", "target")
        .order_by("-created_at", "-id")[:50]
    )
    return EntityPage(entity, facts, mentions, relationships, co_mentioned, merged)
