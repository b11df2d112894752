"""What a pack offers beside its items: communities and suggested next calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accounts.principals import Principal
from config.db.arrays import IntArray
from config.db.prepared import lookup_rows
from memory.models import Conflict, ConflictStatus
from recall.cascade import CascadeState
from recall.communities import communities_for_pack
from recall.pipeline.intent import Intent
from recall.scope import Scope
from recall.types import ContextPack, Degradation, RecallRequest

MAX_CONFLICT_ACTIONS = 5


def communities_field(
    base: Scope,
    request: RecallRequest,
    intent: Intent,
    entity_ids: dict[str, int],
    pack: ContextPack,
    state: CascadeState,
    count_tokens: Callable[[str], int],
) -> list[dict[str, Any]]:
    """The separately budgeted ``communities``; temporal recalls skip them."""
    if request.communities_budget_tokens <= 0 or pack.no_match:
        return []
    if intent.window is not None:
        state.degradations.append(
            Degradation(
                "communities_skipped",
                "communities",
                "temporal recall: communities are not time-scoped; skipped",
            )
        )
        return []
    return communities_for_pack(
        base,
        entity_ids=sorted(set(entity_ids.values())),
        item_ids=[i.id for i in pack.items],
        budget_tokens=request.communities_budget_tokens,
        count_tokens=count_tokens,
    )


def suggested_actions(principal: Principal, pack: ContextPack) -> list[dict[str, Any]]:
    """The feedback call for this recall and resolve calls for its open conflicts."""
    actions: list[dict[str, Any]] = []
    if pack.recall_id is not None:
        actions.append(
            {
                "action": "feedback",
                "method": "POST",
                "path": f"/api/v1/recall/{pack.recall_id}/feedback",
                "body": {"verdict": "helpful", "memory_id": None},
                "why": "tell Mnemo whether this pack helped (per item or as a whole)",
            }
        )
    ids = [i.id for i in pack.items]
    if not ids:
        return actions
    # One indexed probe first: almost no pack touches an open conflict, and the
    # visibility-checked query below cost ~7 ms a recall (docs/benchmarks.md).
    # Plain SQL: compiling the ORM query cost more than running it; planned once.
    ((touches,),) = lookup_rows(
        "SELECT EXISTS (SELECT 1 FROM memory_conflictalternative a "
        "JOIN memory_conflict k ON k.id = a.conflict_id "
        "WHERE a.memory_id = ANY(%s) AND k.status = %s)",
        [IntArray(ids), ConflictStatus.OPEN],
    )
    if not touches:
        return actions
    conflicts = (
        Conflict.objects.visible_to(principal)
        .open()
        .filter(alternatives__memory_id__in=ids)
        .distinct()
        .order_by("-created_at", "-id")[:MAX_CONFLICT_ACTIONS]
    )
    for conflict in conflicts:
        touching = sorted(
            set(conflict.alternatives.values_list("memory_id", flat=True)) & set(ids)
        )
        actions.append(
            {
                "action": "resolve_conflict",
                "method": "POST",
                "path": f"/api/v1/conflicts/{conflict.pk}/resolve",
                "body": {"action": "choose", "chosen": touching[0]},
                "why": f"open {conflict.kind} touching item(s) {touching}",
                "conflict_id": conflict.pk,
                "memory_ids": touching,
            }
        )
    return actions
