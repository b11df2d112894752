"""The recall feedback loop: verdicts, their review, agent outcomes, reinforcement.

One function per state change, each in one transaction, keyword-only and typed:
``feedback_submit`` (anyone who can see the recall), ``feedback_accept`` /
``feedback_reject`` (a writer who can see it; the memory change goes through
``memory.services`` so append-only history and access rules hold) and
``outcome_record`` (an agent that opted in writes its answer as an episode).

Recording feedback or an outcome never changes ranking by itself. Ranking only moves
through an accepted action on memory, or, when the org's ``RecallConfig`` sets a
reinforcement weight above 0, through :func:`reinforcement_multipliers`.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone

from accounts.audit import audit_record
from accounts.principals import Principal
from memory import services as memory_services
from memory.models import Memory
from memory.services import Forbidden, MemoryInput, NotFound, StateConflict, WriteError
from recall.models import (
    AgentRecallSettings,
    Feedback,
    RecallConfig,
    RecallEvent,
    ReviewStatus,
    Verdict,
)

MEMORY_ACTIONS = ("supersede", "retract", "reinforce", "outdated")
REVIEW_ACTIONS = (*MEMORY_ACTIONS, "none")
OUTCOMES = ("success", "failure", "partial")
OUTCOME_SOURCE = "recall_outcome"
_REVIEW_FIELDS = ["review_status", "action", "reviewer", "review_note", "reviewed_at"]


# --- access ---------------------------------------------------------------------------


def access_recall(principal: Principal, recall_id: int) -> RecallEvent:
    """The recall if the principal may see it; missing and not yours are one answer."""
    try:
        return RecallEvent.objects.visible_to(principal).get(pk=recall_id)
    except (RecallEvent.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("recall not found") from exc


def access_feedback(principal: Principal, feedback_id: int) -> Feedback:
    """Feedback on a recall the principal may see, else ``NotFound``."""
    try:
        return (
            Feedback.objects.visible_to(principal)
            .select_related("event")
            .get(pk=feedback_id)
        )
    except (Feedback.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("feedback not found") from exc


# --- submit ---------------------------------------------------------------------------


def feedback_submit(
    *,
    principal: Principal,
    recall_id: int,
    verdict: str,
    memory_id: int | None = None,
    comment: str = "",
    expected_memory_id: int | None = None,
) -> Feedback:
    """Record a verdict on recall ``recall_id`` (whole, or its item ``memory_id``).

    Anyone who can see the recall may give feedback, viewers included: it is a record
    of use, not a change to memory. ``missing`` names the row that should have come in
    ``expected_memory_id``, which the principal must be able to see (else a 404 on
    that field, the same answer as for an id that does not exist).
    """
    event = access_recall(principal, recall_id)
    if verdict not in Verdict.values:
        raise WriteError(f"unknown verdict {verdict!r}", field="verdict")
    if memory_id is not None and memory_id not in event.item_ids:
        raise WriteError(
            f"memory {memory_id} was not in recall {event.pk}", field="memory_id"
        )
    if verdict == Verdict.MISSING:
        if memory_id is not None:
            raise WriteError(
                "a 'missing' verdict is about the whole recall; name the row that "
                "should have come in expected_memory_id",
                field="memory_id",
            )
        if expected_memory_id is None:
            raise WriteError(
                "a 'missing' verdict needs the id that should have come",
                field="expected_memory_id",
            )
        if (
            not Memory.objects.visible_to(principal)
            .filter(pk=expected_memory_id)
            .exists()
        ):
            raise WriteError(
                f"memory {expected_memory_id} not found",
                field="expected_memory_id",
                status=404,
            )
    elif expected_memory_id is not None:
        raise WriteError(
            "expected_memory_id is only for the 'missing' verdict",
            field="expected_memory_id",
        )
    with transaction.atomic():
        return Feedback.objects.create(
            org_id=event.org_id,
            event=event,
            memory_id=memory_id,
            verdict=verdict,
            comment=comment,
            expected_memory_id=expected_memory_id,
            author=principal.label,
        )


# --- review ---------------------------------------------------------------------------


def _require_reviewer(principal: Principal) -> None:
    if not principal.can_write:
        raise Forbidden("read-only role")


def _lock_new(principal: Principal, feedback_id: int) -> Feedback:
    access_feedback(principal, feedback_id)  # NotFound for missing or not yours
    feedback = Feedback.objects.select_for_update().get(pk=feedback_id)
    if feedback.review_status != ReviewStatus.NEW:
        raise StateConflict(
            f"feedback {feedback.pk} is already {feedback.review_status}"
        )
    return feedback


def _close(
    feedback: Feedback, *, status: str, result: dict[str, Any], user: Any, note: str
) -> Feedback:
    before = {"review_status": feedback.review_status}
    feedback.review_status = status
    feedback.action = result
    feedback.reviewer = user if getattr(user, "pk", None) else None
    feedback.review_note = note
    feedback.reviewed_at = timezone.now()
    feedback.save(update_fields=_REVIEW_FIELDS)
    audit_record(
        org_id=feedback.org_id,
        action="feedback.review",
        user=user,
        target=feedback,
        actor=str(result.get("reviewed_by") or ""),
        target_type="recall.feedback",
        before=before,
        after={"review_status": status, "action": result},
        note=note,
    )
    return feedback


def feedback_accept(
    *,
    principal: Principal,
    user: Any,
    feedback_id: int,
    action: str,
    correction: str = "",
    note: str = "",
) -> Feedback:
    """Accept feedback and apply ``action`` to its memory.

    ``supersede`` writes ``correction`` as the new current version; ``retract`` takes
    the row out of every current view; ``outdated`` supersedes it with the same text
    valid until now (it was true, it is no longer); ``reinforce`` counts an accepted
    confirmation in ``Memory.reinforcement`` (a scoring input, not content, used only
    when the org's reinforcement weight is above 0); ``none`` records the verdict only.
    The review keeps who, when, the note and what was done (``Feedback.action``).
    """
    _require_reviewer(principal)
    if action not in REVIEW_ACTIONS:
        raise WriteError(f"unknown action {action!r}", field="action")
    with transaction.atomic():
        feedback = _lock_new(principal, feedback_id)
        result: dict[str, Any] = {"action": action, "reviewed_by": principal.label}
        if action in MEMORY_ACTIONS:
            if feedback.memory_id is None:
                raise StateConflict(
                    "this feedback is about the whole recall, not a row"
                )
            result.update(
                _apply(principal, feedback.memory_id, action, correction, note)
            )
        return _close(
            feedback, status=ReviewStatus.ACCEPTED, result=result, user=user, note=note
        )


def _apply(
    principal: Principal, memory_id: int, action: str, correction: str, note: str
) -> dict[str, Any]:
    reason = f"feedback review: {note}" if note else "feedback review"
    if action == "retract":
        memory_services.memory_retract(
            principal=principal, memory_id=memory_id, reason=reason
        )
        return {"memory": memory_id}
    old = memory_services.access_memory(principal, memory_id, for_update=True)
    if action == "reinforce":
        counts = dict(old.reinforcement or {})
        counts["accepted"] = int(counts.get("accepted", 0)) + 1
        Memory.objects.filter(pk=old.pk).update(reinforcement=counts)
        return {"memory": old.pk, "reinforcement": counts}
    valid_to: datetime | None
    if action == "outdated":
        text, valid_to = old.content, timezone.now()
    else:
        text, valid_to = correction, old.valid_to
    new = memory_services.memory_supersede(
        principal=principal,
        memory_id=old.pk,
        correction=MemoryInput(
            content=text,
            tier=old.tier,
            kind=old.kind,
            valid_from=old.valid_from,
            valid_to=valid_to,
            speaker=old.speaker,
            context=old.context,
            confidence=old.confidence,
        ),
        reason=reason,
    )
    return {"memory": old.pk, "new_memory": new.pk}


def feedback_reject(
    *, principal: Principal, user: Any, feedback_id: int, note: str = ""
) -> Feedback:
    """Reject feedback: memory is unchanged, the review and its note are kept."""
    _require_reviewer(principal)
    with transaction.atomic():
        feedback = _lock_new(principal, feedback_id)
        result = {"action": "reject", "reviewed_by": principal.label}
        return _close(
            feedback, status=ReviewStatus.REJECTED, result=result, user=user, note=note
        )


# --- outcomes -------------------------------------------------------------------------


def records_outcomes(principal: Principal) -> bool:
    """Whether ``principal`` is an agent that opted in to outcome recording."""
    if principal.kind != "agent" or principal.agent_id is None:
        return False
    return AgentRecallSettings.objects.filter(
        agent_id=principal.agent_id, record_outcomes=True
    ).exists()


def outcome_record(
    *, principal: Principal, recall_id: int, answer: str, outcome: str, note: str = ""
) -> Memory:
    """Store the answer an agent gave from recall ``recall_id`` and how it went.

    The episode (tier ``episodic``, kind ``episode``) is derived from the packed items
    the agent can still see, so lineage shows what the answer was built on, and its
    metadata links the recall. Opt-in per agent (``AgentRecallSettings``); one outcome
    per recall (a second one is a 409, never a silent overwrite).
    """
    event = access_recall(principal, recall_id)  # 404 before 403
    if not records_outcomes(principal):
        raise Forbidden(
            "outcome recording is off for this principal: only agents whose recall "
            "settings have record_outcomes on may store outcomes"
        )
    if outcome not in OUTCOMES:
        raise WriteError(f"outcome must be one of {list(OUTCOMES)}", field="outcome")
    if not answer.strip():
        raise WriteError("the answer may not be blank", field="answer")
    key = f"recall-outcome:{event.pk}"
    with transaction.atomic():
        existing = Memory.objects.filter(
            org_id=event.org_id, idempotency_key=key
        ).first()
        if existing is not None:
            raise StateConflict(
                f"an outcome for recall {event.pk} is already recorded "
                f"(memory {existing.pk})"
            )
        sources = sorted(
            Memory.objects.visible_to(principal)
            .filter(pk__in=event.item_ids)
            .values_list("id", flat=True)
        )
        text = f"Asked: {event.query}\nAnswered: {answer}\nOutcome: {outcome}"
        if note:
            text += f" ({note})"
        result = memory_services.memory_remember(
            principal=principal,
            field_prefix="outcome",
            items=[
                MemoryInput(
                    content=text,
                    tier="episodic",
                    kind="episode",
                    occurred_at=timezone.now(),
                    derived_from=tuple(sources),
                    idempotency_key=key,
                    metadata={
                        "source": OUTCOME_SOURCE,
                        "recall_id": event.pk,
                        "outcome": outcome,
                        "note": note,
                    },
                )
            ],
        )
        return result.memories[0]


# --- reinforcement --------------------------------------------------------------------


def reinforcement_factor(weight: float, count: int) -> float:
    """``1 + weight * ln(1 + count)``: diminishing returns, exactly 1 at weight 0."""
    return 1.0 + weight * math.log1p(max(count, 0))


def reinforcement_multipliers(
    org_id: int, memory_ids: list[int]
) -> dict[int, dict[str, float]]:
    """``{id: {"reinforcement": factor}}`` for rows with accepted reinforcements or
    successful outcomes, in one query; ``{}`` when the org's weight is 0 (the default).

    Counts: ``Memory.reinforcement["accepted"]`` (accepted ``reinforce`` reviews) plus
    active outcome episodes with ``outcome == "success"`` derived from the row.
    """
    if not memory_ids:
        return {}
    weight = RecallConfig.objects.filter(org_id=OuterRef("org_id")).values(
        "reinforcement_weight"
    )[:1]
    successes = Count(
        "derivations",
        filter=Q(
            derivations__status="active",
            derivations__metadata__source=OUTCOME_SOURCE,
            derivations__metadata__outcome="success",
        ),
    )
    rows = (
        Memory.objects.filter(org_id=org_id, pk__in=memory_ids)
        .annotate(weight=Subquery(weight), successes=successes)
        .filter(weight__gt=0)
        .values_list("id", "reinforcement", "successes", "weight")
    )
    out: dict[int, dict[str, float]] = {}
    for mid, counts, success_count, w in rows:
        accepted = int((counts or {}).get("accepted", 0) or 0)
        total = accepted + int(success_count or 0)
        if total > 0:
            out[mid] = {"reinforcement": reinforcement_factor(float(w), total)}
    return out
