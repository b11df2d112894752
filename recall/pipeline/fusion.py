"""Weighted reciprocal rank fusion and the score adjustments applied after it.

Every function returns items sorted by score descending with ties broken by
``memory_id`` ascending, so the same inputs always give the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from recall.pipeline.types import ChannelContribution, ChannelHit, FusedItem

DEFAULT_K = 60


def _sorted_items(items: Iterable[FusedItem]) -> list[FusedItem]:
    return sorted(items, key=lambda item: (-item.score, item.memory_id))


def fuse_rrf(
    rankings: Mapping[str, Sequence[ChannelHit]],
    weights: Mapping[str, float],
    *,
    k: int = DEFAULT_K,
    phase: int = 1,
) -> list[FusedItem]:
    """Fuse per-channel rankings with weighted RRF: ``sum_c weight_c / (k + rank_c)``.

    A channel missing from ``weights`` counts with weight 1.0; a channel whose
    weight is 0 (or negative) is ignored entirely, as if it had returned nothing.
    When one channel returns the same memory twice, its best rank is kept (and,
    at equal rank, the higher raw score). Scores are summed with ``math.fsum`` in
    channel-name order, so the mapping's iteration order never changes a result.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    best: dict[int, dict[str, ChannelHit]] = {}
    for channel in sorted(rankings):
        weight = float(weights.get(channel, 1.0))
        if not weight > 0.0:
            continue
        for hit in rankings[channel]:
            if hit.rank < 1:
                raise ValueError(f"rank must be 1-based, got {hit.rank} in {channel}")
            per_channel = best.setdefault(hit.memory_id, {})
            seen = per_channel.get(channel)
            if seen is None or (hit.rank, -hit.score) < (seen.rank, -seen.score):
                per_channel[channel] = hit
    fused = []
    for memory_id, per_channel in best.items():
        contributions = []
        for channel in sorted(per_channel):
            hit = per_channel[channel]
            weight = float(weights.get(channel, 1.0))
            contributions.append(
                ChannelContribution(
                    channel=channel,
                    rank=hit.rank,
                    score=float(hit.score),
                    weight=weight,
                    rrf=weight / (k + hit.rank),
                )
            )
        fused.append(
            FusedItem(
                memory_id=memory_id,
                score=math.fsum(c.rrf for c in contributions),
                contributions=tuple(contributions),
                phase=phase,
            )
        )
    return _sorted_items(fused)


def apply_adjustments(
    items: Iterable[FusedItem],
    *,
    multipliers: Mapping[int, Mapping[str, float]],
) -> list[FusedItem]:
    """Multiply scores by named factors and re-sort.

    ``multipliers`` maps a memory id to ``{name: factor}``, e.g.
    ``{7: {"stale": 0.5, "answer_type": 1.2}}``. Factors above 1 are recorded in
    ``boosts``, below 1 in ``penalties``; exactly 1 is a no-op. Applying the same
    name twice compounds and the recorded factor is the product.
    """
    adjusted = []
    for item in items:
        factors = multipliers.get(item.memory_id)
        if not factors:
            adjusted.append(item)
            continue
        score = item.score
        boosts = dict(item.boosts)
        penalties = dict(item.penalties)
        for name in sorted(factors):
            factor = float(factors[name])
            if factor < 0.0 or math.isnan(factor):
                raise ValueError(f"multiplier {name!r} must be >= 0, got {factor}")
            if factor == 1.0:
                continue
            score *= factor
            bucket = boosts if factor > 1.0 else penalties
            bucket[name] = bucket.get(name, 1.0) * factor
        adjusted.append(replace(item, score=score, boosts=boosts, penalties=penalties))
    return _sorted_items(adjusted)


def spread_to_neighbors(
    items: Iterable[FusedItem],
    neighbors: Mapping[int, Sequence[int]],
    *,
    share: float,
    max_sources: int | None = None,
) -> list[FusedItem]:
    """Give each item's neighbours ``share * score`` of it, then re-sort.

    Typical neighbours are the previous and next turn of the same session: the
    evidence for a question often sits right beside the turn that matched.
    Spreading uses the scores as they were before this call (no cascading), only
    from the top ``max_sources`` items when given, and never from an item to
    itself. Neighbours not yet present are created with no channel contributions
    and the phase of their strongest source. What each item received is recorded
    in ``spread_from`` as ``{source_id: amount}``.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError("share must be within [0, 1]")
    ordered = _sorted_items(items)
    by_id = {item.memory_id: item for item in ordered}
    sources = ordered if max_sources is None else ordered[: max(max_sources, 0)]
    received: dict[int, dict[int, float]] = {}
    phase_of_new: dict[int, tuple[float, int]] = {}
    for source in sources:
        amount = share * source.score
        if amount <= 0.0:
            continue
        for neighbor_id in neighbors.get(source.memory_id, ()):
            if neighbor_id == source.memory_id:
                continue
            gifts = received.setdefault(neighbor_id, {})
            gifts[source.memory_id] = gifts.get(source.memory_id, 0.0) + amount
            if neighbor_id not in by_id:
                best = phase_of_new.get(neighbor_id)
                if best is None or amount > best[0]:
                    phase_of_new[neighbor_id] = (amount, source.phase)
    if not received:
        return ordered
    result = []
    for item in ordered:
        incoming = received.get(item.memory_id)
        if incoming is None:
            result.append(item)
            continue
        merged = dict(item.spread_from)
        for source_id, amount in incoming.items():
            merged[source_id] = merged.get(source_id, 0.0) + amount
        score = item.score + math.fsum(incoming.values())
        result.append(replace(item, score=score, spread_from=merged))
    for neighbor_id, (_, phase) in phase_of_new.items():
        incoming = received[neighbor_id]
        result.append(
            FusedItem(
                memory_id=neighbor_id,
                score=math.fsum(incoming.values()),
                phase=phase,
                spread_from=dict(incoming),
            )
        )
    return _sorted_items(result)
