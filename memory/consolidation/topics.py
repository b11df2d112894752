"""Topics: one digest row per entity (and access scope) over its facts and episodes.

A topic covers the active facts whose subject is the entity plus the active episodes
that mention it; ``derived_from`` and ``metadata["covers"]`` both list them, so recall
can avoid packing a topic next to the rows it summarises. When the covered set changes
a new topic row supersedes the previous one (same ``topic_key``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings

from memory.consolidation.writer import (
    DerivedRow,
    Scope,
    narrowest_scope,
    scope_label,
    scope_of,
    supersede_rows,
    write_rows,
)
from memory.models import Entity, Memory, Mention, Relationship, Status, Tier


def refresh_topics(org_id: int, entity_ids: Iterable[int], now: datetime) -> list[int]:
    """Rewrite the topics of ``entity_ids`` whose covered rows changed."""
    min_facts = int(getattr(settings, "MNEMO_TOPIC_MIN_FACTS", 3))
    ids = set(entity_ids)
    if not ids:
        return []
    entities = {
        e.pk: e for e in Entity.objects.filter(pk__in=ids, merged_into__isnull=True)
    }
    facts: dict[tuple[int, Scope], list[Memory]] = {}
    rels = (
        Relationship.objects.filter(
            org_id=org_id,
            subject_id__in=entities,
            status=Status.ACTIVE,
            statement__status=Status.ACTIVE,
        )
        .select_related("statement")
        .order_by("statement__occurred_at", "statement_id")
    )
    for rel in rels:
        assert rel.statement is not None
        facts.setdefault((rel.subject_id, scope_of(rel.statement)), []).append(
            rel.statement
        )
    episodes: dict[int, list[Memory]] = {}
    for mention in Mention.objects.filter(
        entity_id__in=entities, memory__kind="episode", memory__status=Status.ACTIVE
    ).select_related("memory"):
        episodes.setdefault(mention.entity_id, []).append(mention.memory)
    rows: list[DerivedRow] = []
    for (entity_id, scope), rows_facts in facts.items():
        if len(rows_facts) < min_facts:
            continue
        entity = entities[entity_id]
        eps = [e for e in episodes.get(entity_id, []) if scope_of(e) == scope]
        covered = list(dict.fromkeys(m.pk for m in [*rows_facts, *eps]))
        digest = hashlib.sha1(",".join(map(str, sorted(covered))).encode())  # noqa: S324
        topic_key = f"{entity_id}:{scope_label(scope)}"
        lines = list(dict.fromkeys(f.content.rstrip(".") for f in rows_facts))[:25]
        content = f"About {entity.name}: " + "; ".join(lines) + "."
        if eps:
            dates = sorted(
                {e.occurred_at.date().isoformat() for e in eps if e.occurred_at}
            )
            content += f" Discussed in {len(eps)} conversations"
            content += f" ({', '.join(dates[:8])})." if dates else "."
        rows.append(
            DerivedRow(
                key=f"consolidate:topic:{topic_key}:{digest.hexdigest()[:16]}",
                tier=Tier.TOPIC,
                kind="topic",
                content=content,
                scope=narrowest_scope([*rows_facts, *eps]),
                sources=covered,
                occurred_at=max(
                    (f.occurred_at for f in rows_facts if f.occurred_at), default=None
                ),
                keywords=[entity.name],
                metadata={
                    "topic_key": topic_key,
                    "entity_id": entity_id,
                    "covers": covered,
                    "derived_by": "rules",
                },
            )
        )
    written = write_rows(org_id, rows, now)
    for row in rows:
        old = (
            Memory.objects.filter(
                org_id=org_id,
                kind="topic",
                status=Status.ACTIVE,
                metadata__topic_key=row.metadata["topic_key"],
            )
            .exclude(pk=written[row.key])
            .values_list("id", flat=True)
        )
        supersede_rows(list(old), written[row.key], now)
    return [written[r.key] for r in rows]


def topic_covers(topic_ids: Iterable[int]) -> dict[int, list[int]]:
    """For each topic or episode id, the ids it covers (its ``derived_from``)."""
    through = Memory.derived_from.through
    out: dict[int, list[int]] = {}
    for topic, covered in through.objects.filter(
        from_memory_id__in=list(topic_ids)
    ).values_list("from_memory_id", "to_memory_id"):
        out.setdefault(topic, []).append(covered)
    return out
