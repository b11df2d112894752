"""Store an :class:`Extraction`: observations, facts (+ relationships) and procedures.

Lineage: observation -> message (``derived_from`` + ``source_span`` with the quote's
offsets); fact and procedure -> observation (and the same span, for citations).
Facts collapse by semantic group within one access scope: a restated fact adds its
observation as evidence and its speaker to ``asserted_by`` instead of a second row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.consolidation.facts import normalize_object, semantic_group
from memory.consolidation.types import Extraction, FactDraft
from memory.consolidation.writer import (
    DerivedRow,
    Scope,
    add_lineage,
    at_midnight,
    scope_of,
    write_rows,
)
from memory.entities import entities_for_names, normalize_name
from memory.models import EntityType, Memory, Relationship, Status, Tier


@dataclass
class Written:
    """Ids of what one pass wrote or touched."""

    observations: list[int] = field(default_factory=list)
    facts: list[int] = field(default_factory=list)
    procedures: list[int] = field(default_factory=list)
    relationships: list[int] = field(default_factory=list)
    entities: set[int] = field(default_factory=set)

    @property
    def new_memory_ids(self) -> list[int]:
        return self.observations + self.facts + self.procedures


def _span(message: Memory, start: int, end: int) -> dict[str, Any]:
    return {
        "memory_id": message.pk,
        "start": start,
        "end": end,
        "quote": message.content[start:end],
    }


def store_extraction(
    extraction: Extraction, messages: Sequence[Memory], now: datetime
) -> Written:
    """Write what ``extraction`` found about ``messages`` (all of one org)."""
    out = Written()
    if not messages:
        return out
    org_id = messages[0].org_id
    by_id = {m.pk: m for m in messages}
    obs_rows: list[DerivedRow] = []
    obs_index: dict[tuple[int, int], DerivedRow] = {}
    for d in extraction.observations:
        msg = by_id.get(d.message_id)
        if msg is None:
            continue
        row = DerivedRow(
            key=f"consolidate:obs:{msg.pk}:{d.index}",
            tier=Tier.EPISODIC,
            kind="observation",
            content=d.content,
            scope=scope_of(msg),
            sources=[msg.pk],
            session_id=msg.session_id,
            speaker=d.speaker,
            occurred_at=at_midnight(d.event_date) or msg.occurred_at,
            source_span=_span(msg, d.quote_start, d.quote_end),
            metadata={
                "derived_by": extraction.produced_by(msg.pk),
                "message_id": msg.pk,
                "message_occurred_at": _iso(msg.occurred_at),
                "dates": [x.as_json() for x in d.dates],
            },
        )
        obs_rows.append(row)
        obs_index[(d.message_id, d.index)] = row
    obs_ids = write_rows(org_id, obs_rows, now)
    out.observations = [obs_ids[r.key] for r in obs_rows]

    proc_rows = []
    for p in extraction.procedures:
        obs = obs_index.get((p.message_id, p.observation))
        if obs is None:
            continue
        proc_rows.append(
            DerivedRow(
                key=f"consolidate:proc:{p.message_id}:{p.observation}",
                tier=Tier.PROCEDURAL,
                kind=p.kind,
                content=p.content,
                scope=obs.scope,
                sources=[obs_ids[obs.key]],
                session_id=obs.session_id,
                speaker=obs.speaker,
                occurred_at=obs.occurred_at,
                source_span=obs.source_span,
                metadata={"derived_by": extraction.produced_by(p.message_id)},
            )
        )
    proc_ids = write_rows(org_id, proc_rows, now)
    out.procedures = [proc_ids[r.key] for r in proc_rows]
    _store_facts(org_id, extraction, obs_index, obs_ids, now, out)
    return out


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def fact_group(fact: FactDraft) -> str:
    predicate = f"not_{fact.predicate}" if fact.negated else fact.predicate
    return semantic_group(fact.subject, predicate, fact.object)


def _store_facts(
    org_id: int,
    extraction: Extraction,
    obs_index: dict[tuple[int, int], DerivedRow],
    obs_ids: dict[str, int],
    now: datetime,
    out: Written,
) -> None:
    drafts = [
        (f, obs_index[(f.message_id, f.observation)])
        for f in extraction.facts
        if (f.message_id, f.observation) in obs_index
    ]
    if not drafts:
        return
    names = [(f.subject, f.subject_type) for f, _ in drafts] + [
        (f.object, f.object_type)
        for f, _ in drafts
        if f.object_type != EntityType.THING
    ]
    entities = entities_for_names(org_id, names)
    groups = {fact_group(f) for f, _ in drafts}
    existing: dict[tuple[str, Scope], Relationship] = {
        (r.semantic_group, scope_of(r)): r
        for r in Relationship.objects.filter(
            org_id=org_id, semantic_group__in=groups, status=Status.ACTIVE
        )
    }
    rows: list[tuple[FactDraft, DerivedRow]] = []
    seen: dict[tuple[str, Scope], DerivedRow] = {}
    restated: list[tuple[Relationship | DerivedRow, DerivedRow]] = []
    for n, (f, obs) in enumerate(drafts):
        group = fact_group(f)
        slot = (group, obs.scope)
        if slot in existing:
            restated.append((existing[slot], obs))
            continue
        if slot in seen:
            restated.append((seen[slot], obs))
            continue
        row = DerivedRow(
            key=f"consolidate:fact:{f.message_id}:{f.observation}:{n}",
            tier=Tier.SEMANTIC,
            kind="fact",
            content=f.content,
            scope=obs.scope,
            sources=[obs_ids[obs.key]],
            session_id=obs.session_id,
            speaker=obs.speaker,
            occurred_at=obs.occurred_at,
            valid_from=at_midnight(f.valid_from),
            valid_to=at_midnight(f.valid_to),
            source_span=obs.source_span,
            keywords=[f.predicate, normalize_object(f.object)],
            metadata={
                "derived_by": extraction.produced_by(f.message_id),
                "subject": f.subject,
                "predicate": f.predicate,
                "object": f.object,
                "negated": f.negated,
                "change": f.change,
                "semantic_group": group,
            },
        )
        seen[slot] = row
        rows.append((f, row))
    fact_ids = write_rows(org_id, [r for _, r in rows], now)
    out.facts = [fact_ids[r.key] for _, r in rows]
    have = set(
        Relationship.objects.filter(statement_id__in=out.facts).values_list(
            "statement_id", flat=True
        )
    )
    rels = [
        _relationship(org_id, f, row, fact_ids[row.key], entities, now)
        for f, row in rows
        if fact_ids[row.key] not in have
    ]
    Relationship.objects.bulk_create(rels)
    through = Relationship.evidence.through
    row_of = {fact_ids[row.key]: row for _, row in rows}
    evidence = [
        through(relationship_id=r.pk, memory_id=m)
        for r in rels
        for m in (
            r.statement_id,
            *row_of[r.statement_id or 0].sources,
            (row_of[r.statement_id or 0].source_span or {}).get("memory_id"),
        )
        if m
    ]
    _restate(org_id, restated, fact_ids, obs_ids, evidence)
    through.objects.bulk_create(evidence, ignore_conflicts=True)
    out.relationships = [r.pk for r in rels]
    out.entities |= {e.pk for e in entities.values()}


def _relationship(
    org_id: int,
    f: FactDraft,
    row: DerivedRow,
    fact_id: int,
    entities: dict[str, Any],
    now: datetime,
) -> Relationship:
    subject = entities[normalize_name(f.subject)]
    obj = entities.get(normalize_name(f.object)) if f.object_type != "thing" else None
    return Relationship(
        org_id=org_id,
        subject=subject,
        predicate=f.predicate,
        object_entity=obj,
        object_literal="" if obj else f.object[:500],
        statement_id=fact_id,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        semantic_group=row.metadata["semantic_group"],
        asserted_by=[row.speaker] if row.speaker else [],
        recorded_at=now,
        **dict(
            zip(
                ("visibility", "team_id", "owner_user_id", "owner_agent_id"),
                row.scope,
                strict=True,
            )
        ),
    )


def _restate(
    org_id: int,
    restated: list[tuple[Relationship | DerivedRow, DerivedRow]],
    fact_ids: dict[str, int],
    obs_ids: dict[str, int],
    evidence: list[Any],
) -> None:
    """A fact stated again: more evidence and lineage, one more asserter, no new row."""
    if not restated:
        return
    through = Relationship.evidence.through
    lineage: list[tuple[int, int]] = []
    by_statement: dict[int, Relationship] = {}
    for target, obs in restated:
        if isinstance(target, Relationship):
            rel = target
        else:
            statement = fact_ids[target.key]
            rel = by_statement.get(statement) or Relationship.objects.get(
                org_id=org_id, statement_id=statement
            )
        by_statement[rel.statement_id or 0] = rel
        obs_id = obs_ids[obs.key]
        message_id = (obs.source_span or {}).get("memory_id")
        evidence += [
            through(relationship_id=rel.pk, memory_id=m)
            for m in (obs_id, message_id)
            if m
        ]
        if rel.statement_id:
            lineage.append((rel.statement_id, obs_id))
        if obs.speaker and obs.speaker not in rel.asserted_by:
            rel.asserted_by = [*rel.asserted_by, obs.speaker]
    Relationship.objects.bulk_update(list(by_statement.values()), ["asserted_by"])
    add_lineage(lineage)
