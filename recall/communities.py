"""Entity communities: recomputed in the background, shown beside a recall's items.

``communities_recompute`` runs label propagation over an org's active entity-to-entity
relationships and replaces the org's :class:`~recall.models.Community` rows.
``communities_for_pack`` picks the communities touching a recall's entities and lists
their member relationships that the items do not already cover, only those whose fact
row the principal may see, inside their own token budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.models import Mention, Relationship, Status
from recall import channels
from recall.models import Community
from recall.pipeline.communities import groups, label_propagation
from recall.scope import Scope

MAX_COMMUNITIES = 3
MAX_MEMBERS_SCANNED = 200


def communities_recompute(org_id: int) -> int:
    """Replace ``org_id``'s communities from its active relationships; count them."""
    rels = list(
        Relationship.objects.filter(
            org_id=org_id, status=Status.ACTIVE, object_entity__isnull=False
        ).values_list("id", "subject_id", "object_entity_id")
    )
    labels = label_propagation((s, o) for _, s, o in rels)
    found = groups(labels)
    members: dict[int, list[int]] = {label: [] for label in found}
    for rid, subject, _ in rels:
        label = labels.get(subject)
        if label in members:
            members[label].append(rid)
    now = timezone.now()
    with transaction.atomic():
        Community.objects.filter(org_id=org_id).delete()
        Community.objects.bulk_create(
            [
                Community(
                    org_id=org_id,
                    label=label,
                    entity_ids=entities,
                    relationship_ids=sorted(members[label]),
                    computed_at=now,
                )
                for label, entities in found.items()
            ]
        )
    return len(found)


def communities_for_pack(
    scope: Scope,
    *,
    entity_ids: Sequence[int],
    item_ids: Sequence[int],
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> list[dict[str, Any]]:
    """Communities of the query's and the items' entities, minus what items cover."""
    if budget_tokens <= 0 or scope.principal.org_id is None:
        return []
    seeds = set(entity_ids) | set(
        Mention.objects.filter(memory_id__in=item_ids).values_list(
            "entity_id", flat=True
        )
    )
    if not seeds:
        return []
    found = list(
        Community.objects.filter(
            org_id=scope.principal.org_id, entity_ids__overlap=sorted(seeds)
        )
    )
    found.sort(key=lambda c: (-len(seeds & set(c.entity_ids)), c.label))
    covered = set(item_ids)
    out: list[dict[str, Any]] = []
    used = 0
    chosen = found[:MAX_COMMUNITIES]
    # One read of every chosen community's relationships and one visibility check.
    by_id = {
        r.pk: r
        for r in Relationship.objects.filter(
            pk__in={
                rid for c in chosen for rid in c.relationship_ids[:MAX_MEMBERS_SCANNED]
            },
            status=Status.ACTIVE,
        ).select_related("subject", "object_entity")
    }
    # The fact row stating a relationship is its visibility: never show one the
    # principal may not read, and skip those the items already carry.
    visible = channels.filter_eligible(
        scope, [r.statement_id for r in by_id.values() if r.statement_id]
    )
    for community in chosen:
        rels = sorted(
            (
                by_id[rid]
                for rid in set(community.relationship_ids[:MAX_MEMBERS_SCANNED])
                if rid in by_id
            ),
            key=lambda r: r.pk,
        )
        members = []
        names: set[str] = set()
        for rel in rels:
            if rel.statement_id not in visible or rel.statement_id in covered:
                continue
            obj = rel.object_entity.name if rel.object_entity else rel.object_literal
            line = f"{rel.subject.name} {rel.predicate} {obj}"
            tokens = count_tokens(line)
            if used + tokens > budget_tokens:
                break
            used += tokens
            names.update(
                n.name for n in (rel.subject, rel.object_entity) if n is not None
            )
            members.append(
                {
                    "relationship_id": rel.pk,
                    "statement_id": rel.statement_id,
                    "text": line,
                    "tokens": tokens,
                }
            )
        if members:
            out.append(
                {
                    "id": community.pk,
                    "label": community.label,
                    "entities": sorted(names),
                    "members": members,
                    "tokens": sum(m["tokens"] for m in members),
                }
            )
    return out
