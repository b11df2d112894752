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
_LINEAGE = Memory.derived_from.through._meta.db_table
# The raw rows each digest derives from, through at most CITATION_DEPTH hops of
# derived_from: one statement (it was two ORM queries a hop; docs/benchmarks.md,
# session 21). A hop continues from any row that is not raw (a row this org cannot see
# has no tier here and continues too, as before; nothing it leads to is cited unless
# read_rows lets the principal see it). Each (item, row, tier, depth) is kept once.
_WALK_SQL = (
    "WITH RECURSIVE walk(item, node, tier, depth) AS ("  # noqa: S608 - model table
    " SELECT i, i, NULL::text, 0 FROM unnest(%s::bigint[]) AS i"
    " UNION"
    " SELECT w.item, e.to_memory_id, m.tier::text, w.depth + 1"
    f" FROM walk w JOIN {_LINEAGE} e ON e.from_memory_id = w.node"
    " LEFT JOIN memory_memory m ON m.id = e.to_memory_id"
    " WHERE w.depth < %s AND w.tier IS DISTINCT FROM 'raw'"
    ") SELECT DISTINCT item, node FROM walk WHERE tier = 'raw'"
)
_WORD = re.compile(r"[a-z0-9]+")


def topic_covers(topic_ids: list[int]) -> dict[int, set[int]]:
    if not topic_ids:
        return {}
    out: dict[int, set[int]] = {}
    # Plain SQL: twice a recall, and the ORM's query compilation cost more than the
    # index lookup itself (docs/benchmarks.md, session 14); planned once (session 20).
    for src, dst in lookup_rows(
        f"SELECT from_memory_id, to_memory_id FROM {_LINEAGE} "  # noqa: S608 - model's table
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

    roots: dict[int, set[int]] = {
        mid: {mid} if rows[mid].tier == "raw" else set() for mid in ids
    }
    digests = [mid for mid in ids if rows[mid].tier != "raw"]
    if digests:
        for item, raw in lookup_rows(_WALK_SQL, [IntArray(digests), CITATION_DEPTH]):
            roots[item].add(raw)
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
