"""Lineage for packed items: the raw evidence rows they cite, the rows digests cover."""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from accounts.principals import Principal
from config.db.arrays import IntArray
from config.db.prepared import lookup_rows
from memory.models import Memory
from recall.channels import MemoryRow, read_rows

CITATION_DEPTH = 4
_WORD = re.compile(r"[a-z0-9]+")


def topic_covers(topic_ids: list[int]) -> dict[int, set[int]]:
    if not topic_ids:
        return {}
    table = Memory.derived_from.through._meta.db_table
    out: dict[int, set[int]] = {}
    # Plain SQL: twice a recall, and the ORM's query compilation cost more than the
    # index lookup itself (docs/benchmarks.md, session 14); planned once (session 20).
    for src, dst in lookup_rows(
        f"SELECT from_memory_id, to_memory_id FROM {table} "  # noqa: S608 - model's table
        "WHERE from_memory_id = ANY(%s)",
        [IntArray(topic_ids)],
    ):
        out.setdefault(src, set()).add(dst)
    return out


def citations_for(
    principal: Principal,
    ids: list[int],
    rows: dict[int, MemoryRow],
    *,
    scores: dict[int, float] | None = None,
    keywords: tuple[str, ...] = (),
    max_per_item: int | None = None,
) -> tuple[dict[int, list[dict[str, Any]]], dict[int, int]]:
    """Raw evidence each item traces to (itself for raw rows), visible rows only,
    and how many such rows each item has in all. ``rows`` holds rows the principal
    may see (at least the items'); raw evidence among them is not read again.

    A digest can cite dozens of turns; they come most relevant first: turns this
    recall itself ranked (by fused score), then turns sharing more query keywords,
    then in time order. ``max_per_item`` keeps the first ones (the full lineage is
    one ``trace`` call away).
    """
    scores = scores or {}
    terms = {k.lower() for k in keywords}

    def overlap(raw: MemoryRow) -> int:
        if not terms:
            return 0
        return len(terms & set(_WORD.findall(raw.content.lower())))

    through = Memory.derived_from.through
    roots: dict[int, set[int]] = {}
    frontier: dict[int, set[int]] = {}
    for mid in ids:
        if rows[mid].tier == "raw":
            roots[mid] = {mid}
        else:
            frontier[mid] = {mid}
            roots[mid] = set()
    for _ in range(CITATION_DEPTH):
        current = {n for nodes in frontier.values() for n in nodes}
        if not current:
            break
        edges: dict[int, list[int]] = {}
        for src, dst in through.objects.filter(from_memory_id__in=current).values_list(
            "from_memory_id", "to_memory_id"
        ):
            edges.setdefault(src, []).append(dst)
        nxt_ids = {d for ds in edges.values() for d in ds}
        tiers = dict(Memory.objects.filter(pk__in=nxt_ids).values_list("id", "tier"))
        new_frontier: dict[int, set[int]] = {}
        for item, nodes in frontier.items():
            for n in nodes:
                for d in edges.get(n, []):
                    if tiers.get(d) == "raw":
                        roots[item].add(d)
                    else:
                        new_frontier.setdefault(item, set()).add(d)
        frontier = new_frontier
    all_raw = {r for rs in roots.values() for r in rs}
    # Raw rows the caller already read (visibility checked) are not read again.
    raw_rows = {r: rows[r] for r in all_raw if r in rows and rows[r].tier == "raw"}
    missing = all_raw - raw_rows.keys()
    if missing:
        raw_rows.update(read_rows(principal, list(missing)))
    out: dict[int, list[dict[str, Any]]] = {}
    totals: dict[int, int] = {}
    for item, raws in roots.items():
        cites = []
        for rid in sorted(
            raws,
            key=lambda r: (
                -scores.get(r, 0.0),
                -overlap(raw_rows[r]) if r in raw_rows else 0,
                (raw_rows[r].occurred_at or timezone.now(), r)
                if r in raw_rows
                else (timezone.now(), r),
            ),
        ):
            raw = raw_rows.get(rid)
            if raw is None:
                continue  # evidence the principal may not see is never cited
            span = rows[item].source_span if item != rid else None
            cites.append(
                {
                    "id": raw.pk,
                    "session": raw.session_id,
                    "occurred_at": raw.occurred_at.isoformat()
                    if raw.occurred_at
                    else None,
                    "external_ref": raw.external_ref,
                    "quote": span or {"start": 0, "end": len(raw.content)},
                }
            )
        totals[item] = len(cites)
        out[item] = cites if max_per_item is None else cites[:max_per_item]
    return out, totals
