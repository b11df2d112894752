"""The honest no-match gate: which fused items are evidence, not padding.

An item clears the gate when one of its channel hits is strong enough on its own:

- a vector hit (the query or a variant) with cosine >= ``min_score``;
- a temporal-window hit with cosine >= ``window_factor * min_score`` (only when the
  window was searched with vectors: without them every row in the window scores 1.0).
  A resolved window ("a week ago") is evidence of its own, so its rows need less
  similarity; ``window_factor`` 1.0 treats them like any vector hit;
- a lexical hit that matched at least ``min_terms`` distinct query terms;

or when it was pulled in by neighbour spreading from an item that clears. Graph,
recency and rerank scores re-order candidates but are never evidence by themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recall.pipeline.types import ChannelHit, FusedItem


@dataclass(frozen=True, slots=True)
class GateResult:
    """Items that cleared (input order), the ones that did not, and why each cleared."""

    kept: tuple[FusedItem, ...]
    dropped: tuple[FusedItem, ...]
    reasons: Mapping[int, str]


def _direct_reason(
    hits: Mapping[str, ChannelHit],
    *,
    min_score: float,
    min_terms: int,
    vector_window: bool,
    window_factor: float,
) -> str | None:
    window_min = round(min_score * window_factor, 4)
    for name in sorted(hits):
        hit, base = hits[name], name.split(":")[0]
        if base == "vector" and hit.score >= min_score:
            return f"{name} cosine {hit.score:.3f} >= {min_score}"
        if base == "temporal" and vector_window and hit.score >= window_min:
            return f"{name} cosine {hit.score:.3f} >= {window_min} inside the window"
        if base == "lexical":
            matched = int(hit.detail.get("matched_terms", 0))
            if matched >= min_terms:
                return f"{name} matched {matched} terms >= {min_terms}"
    return None


def relevance_gate(
    items: Iterable[FusedItem],
    hits: Mapping[int, Mapping[str, ChannelHit]],
    *,
    min_score: float,
    min_terms: int,
    vector_window: bool,
    window_factor: float = 1.0,
) -> GateResult:
    """Split ``items`` into those that clear the relevance gate and the rest."""
    items = list(items)
    reasons: dict[int, str] = {}
    for item in items:
        reason = _direct_reason(
            hits.get(item.memory_id, {}),
            min_score=min_score,
            min_terms=min_terms,
            vector_window=vector_window,
            window_factor=window_factor,
        )
        if reason is not None:
            reasons[item.memory_id] = reason
    for item in items:
        if item.memory_id in reasons:
            continue
        sources = [s for s in item.spread_from if s in reasons]
        if sources:
            reasons[item.memory_id] = f"neighbour of {min(sources)}"
    kept = tuple(i for i in items if i.memory_id in reasons)
    dropped = tuple(i for i in items if i.memory_id not in reasons)
    return GateResult(kept, dropped, reasons)


def min_terms_for(query_terms: int, *, required: int = 2) -> int:
    """Distinct terms a lexical-only hit needs: ``required``, or all of fewer."""
    return max(1, min(required, query_terms))
