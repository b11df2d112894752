"""A memory's lineage: what it was derived from (up), what was derived from it (down),
and its supersession chain. Bounded in depth and size; invisible rows are never shown.
"""

from __future__ import annotations

from typing import Any

from accounts.principals import Principal
from memory.access import visibility_q
from memory.models import Memory


def _node(m: Memory, depth: int) -> dict[str, Any]:
    return {
        "id": m.pk,
        "tier": m.tier,
        "kind": m.kind,
        "content": m.content,
        "status": m.status,
        "depth": depth,
        "session": m.session_id,
        "external_ref": m.external_ref,
        "source_span": m.source_span,
        "occurred_at": m.occurred_at.isoformat() if m.occurred_at else None,
        "untrusted": True,
    }


def _walk(
    principal: Principal, start: int, *, up: bool, max_depth: int, max_nodes: int
) -> tuple[list[dict[str, Any]], str | None]:
    through = Memory.derived_from.through
    seen = {start}
    frontier = [start]
    out: list[dict[str, Any]] = []
    for depth in range(1, max_depth + 1):
        if not frontier:
            return out, None
        if up:
            pairs = through.objects.filter(from_memory_id__in=frontier).values_list(
                "to_memory_id", flat=True
            )
        else:
            pairs = through.objects.filter(to_memory_id__in=frontier).values_list(
                "from_memory_id", flat=True
            )
        ids = [i for i in dict.fromkeys(pairs) if i not in seen]
        rows = Memory.objects.filter(visibility_q(principal), pk__in=ids).order_by("id")
        frontier = []
        for m in rows:
            if len(out) >= max_nodes:
                return out, "max_nodes"
            seen.add(m.pk)
            frontier.append(m.pk)
            out.append(_node(m, depth))
    return out, ("max_depth" if frontier else None)


def trace(
    principal: Principal, memory: Memory, *, max_depth: int = 4, max_nodes: int = 200
) -> dict[str, Any]:
    """Lineage of ``memory`` for ``principal``; ``stopped_reason`` tells a cut."""
    up, up_stop = _walk(
        principal, memory.pk, up=True, max_depth=max_depth, max_nodes=max_nodes
    )
    down, down_stop = _walk(
        principal, memory.pk, up=False, max_depth=max_depth, max_nodes=max_nodes
    )
    chain = []
    visible = Memory.objects.filter(visibility_q(principal))
    older = list(visible.filter(superseded_by=memory))
    current = memory
    steps = 0
    while current.superseded_by_id and steps < max_depth:
        nxt = visible.filter(pk=current.superseded_by_id).first()
        if nxt is None:
            break
        chain.append(_node(nxt, steps + 1))
        current, steps = nxt, steps + 1
    return {
        "id": memory.pk,
        "memory": _node(memory, 0),
        "up": up,
        "down": down,
        "supersedes": [_node(m, -1) for m in older],
        "supersession": chain,
        "stopped_reason": up_stop or down_stop or "complete",
    }
