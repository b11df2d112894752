"""Reads for the two review queues (conflicts, recall feedback), from the principal.

``access_feedback`` lives in ``recall.feedback`` (re-exported here for the views).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from accounts.principals import Principal
from memory.models import Conflict, ConflictAlternative, Memory
from memory.services import NotFound
from recall.feedback import access_feedback as access_feedback
from recall.models import Feedback, ReviewStatus


def visible_memories(
    principal: Principal, ids: Iterable[int | None]
) -> dict[int, Memory]:
    """``{id: memory}`` for the ids the principal may read (others are left out)."""
    wanted = [i for i in ids if i is not None]
    if not wanted:
        return {}
    return {m.pk: m for m in Memory.objects.visible_to(principal).filter(pk__in=wanted)}


# --- conflicts ------------------------------------------------------------------------


def conflict_queue(principal: Principal, status: str) -> QuerySet[Conflict]:
    """Visible conflicts by status (``all`` for every status), newest first."""
    qs = Conflict.objects.visible_to(principal).select_related("subject", "chosen")
    if status and status != "all":
        qs = qs.filter(status=status)
    return qs.prefetch_related("events").order_by("-created_at", "-id")


@dataclass
class ConflictCase:
    conflict: Conflict
    alternatives: list[ConflictAlternative]
    hidden: int


def conflict_cases(
    principal: Principal, conflicts: Iterable[Conflict]
) -> list[ConflictCase]:
    """Each conflict with only the alternatives the principal may see."""
    conflicts = list(conflicts)
    alts = list(
        ConflictAlternative.objects.filter(conflict__in=conflicts)
        .select_related("memory", "relationship")
        .order_by("id")
    )
    visible = visible_memories(principal, [a.memory_id for a in alts])
    cases = []
    for c in conflicts:
        mine = [a for a in alts if a.conflict_id == c.pk]
        shown = [a for a in mine if a.memory_id in visible]
        cases.append(ConflictCase(c, shown, len(mine) - len(shown)))
    return cases


def access_conflict(principal: Principal, conflict_id: int) -> Conflict:
    try:
        return Conflict.objects.visible_to(principal).get(pk=conflict_id)
    except (Conflict.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("conflict not found") from exc


# --- feedback -------------------------------------------------------------------------


def feedback_visible_to(principal: Principal) -> QuerySet[Feedback]:
    """Feedback on recalls the principal may see (admins: all; others: own)."""
    return Feedback.objects.visible_to(principal)


def feedback_queue(principal: Principal, filters: dict[str, Any]) -> QuerySet[Feedback]:
    qs = feedback_visible_to(principal).select_related("event")
    status = filters.get("status") or ReviewStatus.NEW
    if status != "all":
        qs = qs.filter(review_status=status)
    if filters.get("verdict"):
        qs = qs.filter(verdict=filters["verdict"])
    return qs.order_by("-created_at", "-id")


@dataclass
class FeedbackRow:
    """A feedback item with the memories it names, where the reader may see them."""

    feedback: Feedback
    memory: Memory | None
    expected: Memory | None
    hidden_memory: bool


def feedback_rows(principal: Principal, items: Iterable[Feedback]) -> list[FeedbackRow]:
    items = list(items)
    ids = [f.memory_id for f in items] + [f.expected_memory_id for f in items]
    visible = visible_memories(principal, ids)
    return [
        FeedbackRow(
            f,
            visible.get(f.memory_id) if f.memory_id else None,
            visible.get(f.expected_memory_id) if f.expected_memory_id else None,
            f.memory_id is not None and f.memory_id not in visible,
        )
        for f in items
    ]
