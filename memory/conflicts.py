"""Contradictions as records: detection, resolution by operators, and drift.

Detection (:func:`conflicts_detect`), for each new relationship:

* functional predicate (``lives_in``, ``works_at``...), another current object, and
  overlapping validity -> either an automatic *supersession with validity* (the new
  statement says it is a change - "moved to", "now works at", "no longer lives in" -
  and comes after the old one, in the same access scope: the old fact is closed at the
  change date by a bounded copy, recorded as an auto-resolved conflict) or an open
  ``fact_conflict`` listing every alternative with its supporters;
* the same statement asserted and denied ("likes hiking" / "does not like hiking") ->
  an open ``evidence_conflict`` with the exact quotes.

Never two silent current truths. Operators resolve in :mod:`memory.conflict_resolution`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from memory.consolidation.facts import FUNCTIONAL
from memory.consolidation.writer import scope_of
from memory.models import (
    Conflict,
    ConflictAlternative,
    ConflictEvent,
    ConflictKind,
    ConflictStatus,
    Entity,
    Memory,
    Relationship,
    Status,
)
from memory.services import (
    sha256_text,
)

SYSTEM = "system"


def _overlaps(a: Relationship, b: Relationship) -> bool:
    return (
        a.valid_to is None or b.valid_from is None or b.valid_from < a.valid_to
    ) and (b.valid_to is None or a.valid_from is None or a.valid_from < b.valid_to)


_CHANGE = re.compile(
    r"\b(moved|relocated|now (?:lives|works)|started working|"
    r"no longer|switched to)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(no longer|not|never|doesn't|doesn’t)\b", re.I)


def _negated(rel: Relationship) -> bool:
    m = rel.statement
    if m is None:
        return False
    if "negated" in m.metadata:
        return bool(m.metadata["negated"])
    return bool(_NEGATION.search(m.content))


def _object_key(rel: Relationship) -> str:
    from memory.consolidation.facts import normalize_object

    if rel.object_entity_id:
        return f"e{rel.object_entity_id}"
    return normalize_object(rel.object_literal)


def _stated_at(rel: Relationship) -> datetime | None:
    m = rel.statement
    if m is None:
        return None
    when = (m.metadata or {}).get("stated_at")
    return datetime.fromisoformat(when) if when else m.occurred_at or m.recorded_at


def conflicts_detect(
    relationship_ids: Sequence[int], *, now: datetime | None = None
) -> list[int]:
    """Check new relationships against current ones; returns conflict ids touched."""
    now = now or timezone.now()
    new = list(
        Relationship.objects.filter(
            pk__in=relationship_ids, status=Status.ACTIVE
        ).select_related("statement")
    )
    if not new:
        return []
    keys = {(r.subject_id, r.predicate) for r in new}
    q = Q()
    for subject, predicate in keys:
        q |= Q(subject_id=subject, predicate=predicate)
    current = list(
        Relationship.objects.filter(q, org_id=new[0].org_id, status=Status.ACTIVE)
        .select_related("statement")
        .order_by("recorded_at", "id")
    )
    touched: list[int] = []
    new_ids = {r.pk for r in new}
    for rel in new:
        for other in current:
            if (
                other.pk == rel.pk
                or other.subject_id != rel.subject_id
                or (
                    other.predicate != rel.predicate
                    or other.status != Status.ACTIVE
                    or rel.status != Status.ACTIVE
                    or (other.pk in new_ids and other.pk > rel.pk)
                )
            ):
                continue
            same_object = _object_key(other) == _object_key(rel)
            if same_object and _negated(other) != _negated(rel):
                positive, negative = (other, rel) if _negated(rel) else (rel, other)
                if rel.predicate in FUNCTIONAL and _is_later_change(negative, positive):
                    touched.append(_auto_close(positive, negative, now))
                    positive.status = Status.SUPERSEDED
                else:
                    touched.append(_open(ConflictKind.EVIDENCE, [other, rel], now).pk)
            elif (
                rel.predicate in FUNCTIONAL
                and not same_object
                and not _negated(rel)
                and not _negated(other)
                and _overlaps(rel, other)
            ):
                older, newer = (
                    (other, rel) if _order(other) <= _order(rel) else (rel, other)
                )
                if _is_later_change(newer, older):
                    touched.append(_auto_close(older, newer, now))
                    older.status = Status.SUPERSEDED
                else:
                    touched.append(_open(ConflictKind.FACT, [other, rel], now).pk)
    refresh_drift({r.subject_id for r in new}, now=now)
    return list(dict.fromkeys(touched))


def _order(rel: Relationship) -> tuple[datetime, int]:
    return (_stated_at(rel) or rel.recorded_at, rel.pk)


def _is_later_change(newer: Relationship, older: Relationship) -> bool:
    """``newer`` says it replaces ``older``: a change statement, later, same scope."""
    m = newer.statement
    if m is None or older.statement is None or scope_of(m) != scope_of(older.statement):
        return False
    if not (m.metadata.get("change") or _negated(newer) or _CHANGE.search(m.content)):
        return False
    boundary = newer.valid_from or newer.valid_to or _stated_at(newer)
    old_start = older.valid_from or _stated_at(older)
    return bool(boundary and old_start and old_start < boundary)


def _auto_close(older: Relationship, newer: Relationship, now: datetime) -> int:
    """Close ``older`` at the change date by a bounded copy; record it resolved."""
    boundary = newer.valid_from or newer.valid_to or _stated_at(newer)
    assert boundary is not None and older.statement is not None
    conflict = _open(ConflictKind.FACT, [older, newer], now, event=False)
    bounded = bound_fact(older, valid_from=older.valid_from, valid_to=boundary, now=now)
    conflict.status = ConflictStatus.RESOLVED
    conflict.resolved_at = now
    conflict.resolution = {
        "action": "both_valid",
        "auto": True,
        "bounds": {
            str(older.statement_id): {
                "valid_to": boundary.isoformat(),
                "replaced_by": bounded,
            }
        },
    }
    conflict.note = "closed automatically: the newer statement is a stated change"
    conflict.save(update_fields=["status", "resolved_at", "resolution", "note"])
    ConflictEvent.objects.bulk_create(
        [
            ConflictEvent(conflict=conflict, action="opened", actor=SYSTEM, at=now),
            ConflictEvent(
                conflict=conflict,
                action="auto_resolved",
                actor=SYSTEM,
                at=now,
                note=conflict.note,
                data={"superseded": [older.statement_id], "created": [bounded]},
            ),
        ]
    )
    return conflict.pk


def bound_fact(
    rel: Relationship,
    *,
    valid_from: datetime | None,
    valid_to: datetime | None,
    now: datetime,
) -> int:
    """Supersede ``rel``'s fact by a copy with new validity bounds; the copy's id."""
    old = rel.statement
    assert old is not None
    suffix = f" (until {valid_to.date().isoformat()})" if valid_to else ""
    content = (
        old.content if not suffix or "(until" in old.content else old.content + suffix
    )
    copy = Memory.objects.create(
        org_id=old.org_id,
        session_id=old.session_id,
        tier=old.tier,
        kind=old.kind,
        content=content,
        context=old.context,
        speaker=old.speaker,
        metadata={
            **old.metadata,
            "supersedes": old.pk,
            "stated_at": ((_stated_at(rel) or now).isoformat()),
        },
        content_sha256=sha256_text(content),
        occurred_at=old.occurred_at,
        valid_from=valid_from,
        valid_to=valid_to,
        recorded_at=now,
        source_span=old.source_span,
        external_ref=old.external_ref,
        confidence=old.confidence,
        keywords=old.keywords,
        visibility=old.visibility,
        team_id=old.team_id,
        owner_user_id=old.owner_user_id,
        owner_agent_id=old.owner_agent_id,
    )
    copy.derived_from.set(old.derived_from.all())
    Memory.objects.filter(pk=old.pk).update(
        status=Status.SUPERSEDED, superseded_by=copy, superseded_at=now
    )
    evidence = list(rel.evidence.values_list("id", flat=True))
    Relationship.objects.filter(pk=rel.pk).update(
        status=Status.SUPERSEDED, superseded_at=now
    )
    new_rel = Relationship.objects.create(
        org_id=rel.org_id,
        subject_id=rel.subject_id,
        predicate=rel.predicate,
        object_entity_id=rel.object_entity_id,
        object_literal=rel.object_literal,
        statement=copy,
        valid_from=valid_from,
        valid_to=valid_to,
        semantic_group=rel.semantic_group,
        asserted_by=rel.asserted_by,
        recorded_at=now,
        visibility=rel.visibility,
        team_id=rel.team_id,
        owner_user_id=rel.owner_user_id,
        owner_agent_id=rel.owner_agent_id,
    )
    new_rel.evidence.set([*evidence, copy.pk])
    from memory.services import enqueue_embedding

    enqueue_embedding([copy.pk])
    return copy.pk


def _supporters(rel: Relationship) -> list[dict[str, object]]:
    return [
        {
            "memory_id": m.pk,
            "kind": m.kind,
            "speaker": m.speaker,
            "quote": (m.source_span or {}).get("quote", ""),
        }
        for m in rel.evidence.exclude(pk=rel.statement_id or 0)
    ]


def _open(
    kind: str, rels: Iterable[Relationship], now: datetime, *, event: bool = True
) -> Conflict:
    """An open conflict on (subject, predicate) with these alternatives.

    Joins the open conflict of the same kind on (subject, predicate) if there is one.
    """
    rels = list(rels)
    first = rels[0]
    conflict = None
    if event:
        conflict = Conflict.objects.filter(
            org_id=first.org_id,
            kind=kind,
            status=ConflictStatus.OPEN,
            subject_id=first.subject_id,
            predicate=first.predicate,
        ).first()
    if conflict is None:
        conflict = Conflict.objects.create(
            org_id=first.org_id,
            kind=kind,
            subject_id=first.subject_id,
            predicate=first.predicate,
            created_at=now,
            summary=" vs ".join(
                f"“{r.statement.content}”" for r in rels if r.statement
            ),
        )
        if event:
            ConflictEvent.objects.create(
                conflict=conflict, action="opened", actor=SYSTEM, at=now
            )
    have = set(conflict.alternatives.values_list("memory_id", flat=True))
    ConflictAlternative.objects.bulk_create(
        [
            ConflictAlternative(
                conflict=conflict,
                memory_id=r.statement_id or 0,
                relationship=r,
                quote=(r.statement.source_span or {}).get("quote", r.statement.content),
                supporters=_supporters(r),
            )
            for r in rels
            if r.statement is not None and r.statement_id not in have
        ],
        ignore_conflicts=True,
    )
    return conflict


def refresh_drift(entity_ids: Iterable[int], *, now: datetime | None = None) -> int:
    """Set ``Entity.unstable`` from open conflicts and recent fact changes (-> flips).

    Unstable while the entity (as subject) has an open conflict, or one of its facts
    was superseded or a conflict about it resolved within ``MNEMO_DRIFT_WINDOW_DAYS``.
    """
    now = now or timezone.now()
    ids = set(entity_ids)
    if not ids:
        return 0
    since = now - timedelta(
        days=float(getattr(settings, "MNEMO_DRIFT_WINDOW_DAYS", 30))
    )
    unstable = set(
        Conflict.objects.filter(subject_id__in=ids)
        .filter(Q(status=ConflictStatus.OPEN) | Q(resolved_at__gte=since))
        .values_list("subject_id", flat=True)
    ) | set(
        Relationship.objects.filter(
            subject_id__in=ids, superseded_at__gte=since
        ).values_list("subject_id", flat=True)
    )
    flips = Entity.objects.filter(pk__in=unstable, unstable=False).update(
        unstable=True, unstable_since=now
    )
    flips += Entity.objects.filter(pk__in=ids - unstable, unstable=True).update(
        unstable=False, unstable_since=None
    )
    return flips


def refresh_drift_all(*, now: datetime | None = None) -> int:
    """Periodic: recheck every flagged entity (flags expire with the window)."""
    ids = Entity.objects.filter(unstable=True).values_list("id", flat=True)
    return refresh_drift(list(ids), now=now)
