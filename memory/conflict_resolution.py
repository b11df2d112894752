"""Resolving conflicts: choose one, both valid with bounds, or dismiss (operators).

One service, one transaction; the loser is superseded (never deleted) and every
step is an appended :class:`ConflictEvent`. Access goes through
:func:`access_conflict`: missing, another org's and invisible conflicts are the same
NotFound; read-only principals are Forbidden.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.audit import audit_record
from accounts.principals import Principal
from memory.access import visibility_q
from memory.conflicts import bound_fact, refresh_drift
from memory.models import (
    Conflict,
    ConflictAlternative,
    ConflictEvent,
    ConflictStatus,
    Memory,
    Relationship,
    Status,
)
from memory.services import Forbidden, NotFound, StateConflict, WriteError


class Action:
    CHOOSE = "choose"
    BOTH_VALID = "both_valid"
    DISMISS = "dismiss"
    ALL = ("choose", "both_valid", "dismiss")


def access_conflict(
    principal: Principal, conflict_id: int, *, for_update: bool = False
) -> Conflict:
    """The conflict if the principal may see one of its alternatives, else NotFound."""
    qs = Conflict.objects.visible_to(principal)
    try:
        pk = Conflict.objects.filter(pk__in=qs.values("pk")).get(pk=conflict_id).pk
        if for_update:
            return Conflict.objects.select_for_update().get(pk=pk)
        return Conflict.objects.get(pk=pk)
    except (Conflict.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("conflict not found") from exc


def visible_alternatives(
    principal: Principal, conflict: Conflict
) -> list[ConflictAlternative]:
    """Only the alternatives whose memory the principal may read."""
    return list(
        conflict.alternatives.filter(visibility_q(principal, prefix="memory__"))
        .select_related("memory", "relationship")
        .order_by("id")
    )


def conflict_resolve(
    *,
    principal: Principal,
    conflict_id: int,
    action: str,
    chosen_id: int | None = None,
    bounds: dict[int, tuple[datetime | None, datetime | None]] | None = None,
    note: str = "",
) -> Conflict:
    """Resolve an open conflict: choose one, declare both valid with bounds, or dismiss.

    ``choose``: every other alternative is superseded by ``chosen_id`` (kept, never
    deleted). ``both_valid``: each alternative named in ``bounds`` is superseded by a
    copy with those validity bounds. ``dismiss``: nothing changes but the status. The
    case's history is an appended :class:`ConflictEvent`. Viewers get Forbidden; other
    orgs and missing ids get NotFound.
    """
    if action not in Action.ALL:
        raise WriteError(f"action must be one of {list(Action.ALL)}", field="action")
    now = timezone.now()
    with transaction.atomic():
        conflict = access_conflict(principal, conflict_id, for_update=True)
        if not principal.can_write:
            raise Forbidden("this principal has read-only access")
        if conflict.status != ConflictStatus.OPEN:
            raise StateConflict(f"conflict {conflict.pk} is {conflict.status}")
        alternatives = list(
            conflict.alternatives.select_related("memory", "relationship")
        )
        visible = {a.pk for a in visible_alternatives(principal, conflict)}
        if any(a.pk not in visible for a in alternatives) and action != Action.DISMISS:
            raise Forbidden("this conflict involves memories you cannot see")
        by_memory = {a.memory_id: a for a in alternatives}
        data: dict[str, object] = {"superseded": [], "created": []}
        if action == Action.CHOOSE:
            if chosen_id not in by_memory:
                raise WriteError(
                    "chosen must be one of the alternatives", field="chosen"
                )
            losers = [a for a in alternatives if a.memory_id != chosen_id]
            for a in losers:
                _supersede_alternative(a, chosen_id, now)
            data["superseded"] = [a.memory_id for a in losers]
            conflict.chosen_id = chosen_id
        elif action == Action.BOTH_VALID:
            if not bounds or any(m not in by_memory for m in bounds):
                raise WriteError("bounds must name alternatives", field="bounds")
            for memory_id, (start, end) in bounds.items():
                if start and end and end <= start:
                    raise WriteError(
                        "valid_to must be after valid_from", field="bounds"
                    )
                rel = by_memory[memory_id].relationship
                if rel is None or rel.status != Status.ACTIVE:
                    raise StateConflict(f"alternative {memory_id} is no longer current")
                data["created"].append(  # type: ignore[attr-defined]
                    bound_fact(rel, valid_from=start, valid_to=end, now=now)
                )
                data["superseded"].append(memory_id)  # type: ignore[attr-defined]
        conflict.status = (
            ConflictStatus.DISMISSED
            if action == Action.DISMISS
            else ConflictStatus.RESOLVED
        )
        conflict.resolution = {
            "action": action,
            "chosen": chosen_id,
            "bounds": {
                str(k): [v.isoformat() if v else None for v in b]
                for k, b in (bounds or {}).items()
            },
            **data,
        }
        conflict.note = note
        conflict.resolved_at = now
        conflict.resolver_id = principal.user_id if principal.kind == "user" else None
        conflict.save(
            update_fields=[
                "status",
                "resolution",
                "note",
                "resolved_at",
                "resolver",
                "chosen",
            ]
        )
        ConflictEvent.objects.create(
            conflict=conflict,
            action=action,
            actor=principal.label,
            note=note,
            data=data,
            at=now,
        )
        audit_record(
            org_id=conflict.org_id,
            action="conflict.resolve",
            principal=principal,
            target=conflict,
            before={"status": ConflictStatus.OPEN},
            after={"status": conflict.status, "resolution": conflict.resolution},
            note=note,
        )
        if conflict.subject_id:
            refresh_drift([conflict.subject_id], now=now)
    return conflict


def _supersede_alternative(
    alt: ConflictAlternative, winner_id: int | None, now: datetime
) -> None:
    Memory.objects.filter(pk=alt.memory_id, status=Status.ACTIVE).update(
        status=Status.SUPERSEDED, superseded_by_id=winner_id, superseded_at=now
    )
    if alt.relationship_id:
        Relationship.objects.filter(
            pk=alt.relationship_id, status=Status.ACTIVE
        ).update(status=Status.SUPERSEDED, superseded_at=now)
