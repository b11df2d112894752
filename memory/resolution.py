"""Entity resolution within an org: normalised names, aliases, trigram and embedding.

Candidates come from ``pg_trgm`` (``normalized_name % other``, served by the trigram GIN
index) and are confirmed by the names' embeddings. Auto-merge rules, in order:

* the same tokens ignoring order and filler words ("The Louvre" / "louvre") -> merge;
* one typo apart, names of 6+ characters ("Lovre Museum" / "Louvre Museum") -> merge;
* trigram similarity >= ``MNEMO_ENTITY_TRGM_MERGE`` (0.8) -> merge;
* trigram >= ``MNEMO_ENTITY_TRGM_CANDIDATE`` (0.5) and cosine of the name embeddings
  >= ``MNEMO_ENTITY_EMBED_MERGE`` (0.85) -> merge ("Acme Widget" / "Acme Widgets");

never across incompatible types, never for dates, never when the names differ by a
number or a one-letter token ("Team A" / "Team B", "May 2022" / "May 2023"). Every merge
is an :class:`EntityMerge` row recording what moved, so :func:`entity_unmerge` restores
the exact prior state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.principals import Principal
from memory.models import (
    Conflict,
    Entity,
    EntityMerge,
    EntityType,
    Mention,
    Relationship,
)
from memory.services import Forbidden, NotFound, StateConflict

_FILLER = frozenset({"the", "a", "an", "of", "and", "&"})


@dataclass(frozen=True)
class Candidate:
    source_id: int
    target_id: int
    reason: str
    trigram: float
    cosine: float | None


def _knob(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[\s\-_.,]+", name) if t and t not in _FILLER}


def _compatible(a: Entity, b: Entity) -> bool:
    if EntityType.DATE in (a.type, b.type):
        return False
    if a.type != b.type and EntityType.THING not in (a.type, b.type):
        return False
    diff = _tokens(a.normalized_name) ^ _tokens(b.normalized_name)
    return not any(t.isdigit() or len(t) == 1 for t in diff)


def _one_edit(a: str, b: str) -> bool:
    """One insertion, deletion or substitution apart, in names of 6+ characters.

    Catches typos ("Lovre" / "Louvre"), which name embeddings do not (cosine ~0.5).
    """
    if min(len(a), len(b)) < 6 or abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def _embed_missing(entities: Iterable[Entity]) -> None:
    from memory import embeddings

    todo = [e for e in entities if e.embedding is None]
    if not todo:
        return
    try:
        vectors = embeddings.embed_texts([e.name for e in todo])
    except embeddings.EmbedderUnavailable:
        return
    for e, v in zip(todo, vectors, strict=True):
        e.embedding = v
    Entity.objects.bulk_update(todo, ["embedding"])


def entity_candidates(org_id: int, entity_ids: Iterable[int]) -> list[Candidate]:
    """Pairs among/around ``entity_ids`` that the rules say are the same entity."""
    ids = list(set(entity_ids))
    if not ids:
        return []
    floor = _knob("MNEMO_ENTITY_TRGM_CANDIDATE", 0.5)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('pg_trgm.similarity_threshold', %s, true)", [str(floor)]
        )
        cursor.execute(
            """
            SELECT a.id, b.id, similarity(a.normalized_name, b.normalized_name)
            FROM memory_entity a
            JOIN memory_entity b ON b.org_id = a.org_id AND b.id <> a.id
                 AND b.merged_into_id IS NULL AND a.normalized_name %% b.normalized_name
            WHERE a.id = ANY(%s) AND a.org_id = %s AND a.merged_into_id IS NULL
            """,
            [ids, org_id],
        )
        pairs = {(min(a, b), max(a, b)): float(sim) for a, b, sim in cursor.fetchall()}
    if not pairs:
        return []
    involved = {i for pair in pairs for i in pair}
    entities = {e.pk: e for e in Entity.objects.filter(pk__in=involved)}
    _embed_missing(entities.values())
    out: list[Candidate] = []
    for (a_id, b_id), sim in sorted(pairs.items()):
        a, b = entities[a_id], entities[b_id]
        if not _compatible(a, b):
            continue
        cosine = None
        if a.embedding is not None and b.embedding is not None:
            cosine = float(np.dot(np.asarray(a.embedding), np.asarray(b.embedding)))
        if _tokens(a.normalized_name) == _tokens(b.normalized_name):
            reason = "same_tokens"
        elif _one_edit(a.normalized_name, b.normalized_name):
            reason = "one_typo"
        elif sim >= _knob("MNEMO_ENTITY_TRGM_MERGE", 0.8):
            reason = "trigram"
        elif cosine is not None and cosine >= _knob("MNEMO_ENTITY_EMBED_MERGE", 0.85):
            reason = "trigram+embedding"
        else:
            continue
        # The better-known entity survives; ties keep the older one.
        source, target = sorted((a, b), key=lambda e: (e.mention_count, -e.pk))
        out.append(
            Candidate(
                source.pk,
                target.pk,
                reason,
                round(sim, 3),
                None if cosine is None else round(cosine, 3),
            )
        )
    return out


def entities_resolve(org_id: int, entity_ids: Iterable[int]) -> list[int]:
    """Auto-merge the candidates around ``entity_ids``; returns EntityMerge ids."""
    merged: set[int] = set()
    done: list[int] = []
    for c in entity_candidates(org_id, entity_ids):
        if c.source_id in merged or c.target_id in merged:
            continue
        merge = entity_merge(
            source_id=c.source_id,
            target_id=c.target_id,
            actor="system",
            reason=c.reason,
            scores={"trigram": c.trigram, "cosine": c.cosine},
        )
        merged.add(c.source_id)
        done.append(merge.pk)
    return done


def _require_operator(principal: Principal | None, org_id: int) -> None:
    if principal is None or principal.is_unrestricted:
        return
    if principal.org_id != org_id:
        raise NotFound("entity not found")
    if not principal.is_org_admin:
        raise Forbidden("only org admins may merge or unmerge entities")


def entity_merge(
    *,
    source_id: int,
    target_id: int,
    actor: str,
    reason: str = "manual",
    scores: dict[str, float | None] | None = None,
    principal: Principal | None = None,
) -> EntityMerge:
    """Merge ``source`` into ``target``: mentions, relationships, conflicts, aliases."""
    with transaction.atomic():
        pair = {
            e.pk: e
            for e in Entity.objects.select_for_update().filter(
                pk__in=[source_id, target_id]
            )
        }
        if len(pair) != 2 or source_id == target_id:
            raise NotFound("entity not found")
        source, target = pair[source_id], pair[target_id]
        _require_operator(principal, source.org_id)
        if source.org_id != target.org_id:
            raise NotFound("entity not found")
        if source.merged_into_id or target.merged_into_id:
            raise StateConflict("one of the entities is already merged")
        taken = set(
            Mention.objects.filter(entity=target).values_list("memory_id", "start")
        )
        mentions = [
            m
            for m, mem, start in Mention.objects.filter(entity=source).values_list(
                "id", "memory_id", "start"
            )
            if (mem, start) not in taken
        ]
        moved: dict[str, list[Any]] = {
            "mentions": mentions,
            "rel_subject": list(
                Relationship.objects.filter(subject=source).values_list("id", flat=True)
            ),
            "rel_object": list(
                Relationship.objects.filter(object_entity=source).values_list(
                    "id", flat=True
                )
            ),
            "conflicts": list(
                Conflict.objects.filter(subject=source).values_list("id", flat=True)
            ),
            "aliases_added": [
                a
                for a in dict.fromkeys([source.normalized_name, *source.aliases])
                if a not in target.aliases and a != target.normalized_name
            ],
        }
        Mention.objects.filter(pk__in=mentions).update(entity=target)
        Relationship.objects.filter(pk__in=moved["rel_subject"]).update(subject=target)
        Relationship.objects.filter(pk__in=moved["rel_object"]).update(
            object_entity=target
        )
        Conflict.objects.filter(pk__in=moved["conflicts"]).update(subject=target)
        target.aliases = [*target.aliases, *moved["aliases_added"]]
        target.mention_count += len(mentions)
        target.save(update_fields=["aliases", "mention_count"])
        Entity.objects.filter(pk=source.pk).update(
            merged_into=target, mention_count=F("mention_count") - len(mentions)
        )
        return EntityMerge.objects.create(
            org_id=source.org_id,
            source=source,
            target=target,
            reason=reason,
            scores=scores or {},
            moved=moved,
            actor=actor,
        )


def entity_unmerge(
    *, merge_id: int, actor: str, principal: Principal | None = None
) -> EntityMerge:
    """Undo a merge exactly: what moved goes back, the aliases it added are removed."""
    with transaction.atomic():
        try:
            merge = EntityMerge.objects.select_for_update().get(pk=merge_id)
        except (EntityMerge.DoesNotExist, ValueError, TypeError) as exc:
            raise NotFound("merge not found") from exc
        _require_operator(principal, merge.org_id)
        if merge.undone_at:
            raise StateConflict("this merge was already undone")
        moved, source, target = merge.moved, merge.source, merge.target
        Mention.objects.filter(pk__in=moved["mentions"], entity=target).update(
            entity=source
        )
        Relationship.objects.filter(pk__in=moved["rel_subject"]).update(subject=source)
        Relationship.objects.filter(pk__in=moved["rel_object"]).update(
            object_entity=source
        )
        Conflict.objects.filter(pk__in=moved["conflicts"]).update(subject=source)
        added = set(moved["aliases_added"])
        target.aliases = [a for a in target.aliases if a not in added]
        target.mention_count = max(0, target.mention_count - len(moved["mentions"]))
        target.save(update_fields=["aliases", "mention_count"])
        Entity.objects.filter(pk=source.pk).update(
            merged_into=None, mention_count=F("mention_count") + len(moved["mentions"])
        )
        merge.undone_at, merge.undone_by = timezone.now(), actor
        merge.save(update_fields=["undone_at", "undone_by"])
        return merge
