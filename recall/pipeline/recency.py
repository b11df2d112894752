"""Recency: an exponential-decay score, a recency channel, and rank_by weights."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from datetime import UTC, datetime

from recall.pipeline.types import ChannelHit

# Weight of the "recency" channel in RRF for each ``rank_by`` mode:
# relevance ignores age entirely, balanced lets recency break near-ties, and
# freshness lets it outvote a single relevance channel (weight 2 vs 1).
RANK_BY_RECENCY_WEIGHT = {"relevance": 0.0, "balanced": 0.5, "freshness": 2.0}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def recency_score(
    occurred_at: datetime, *, now: datetime, half_life_days: float = 7.0
) -> float:
    """Score in (0, 1] that halves every ``half_life_days`` of age.

    1.0 when ``occurred_at`` is now or in the future. Naive datetimes are taken
    as UTC. Very old items get the smallest positive float, never 0, so the
    score stays strictly positive and still orders by age.
    """
    if half_life_days <= 0:
        raise ValueError("half_life_days must be > 0")
    age_days = (_aware(now) - _aware(occurred_at)).total_seconds() / 86400.0
    if age_days <= 0:
        return 1.0
    return max(math.exp(-math.log(2.0) * age_days / half_life_days), sys.float_info.min)


def recency_hits(
    items: Iterable[tuple[int, datetime | None]],
    *,
    now: datetime,
    half_life_days: float = 7.0,
    channel: str = "recency",
) -> list[ChannelHit]:
    """Rank ``(memory_id, occurred_at)`` pairs newest first as a channel.

    Items without a time are skipped; ties go to the smaller id.
    """
    scored = [
        (recency_score(moment, now=now, half_life_days=half_life_days), memory_id)
        for memory_id, moment in items
        if moment is not None
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [
        ChannelHit(channel=channel, memory_id=memory_id, rank=position, score=score)
        for position, (score, memory_id) in enumerate(scored, start=1)
    ]


def rank_by_weights(rank_by: str) -> dict[str, float]:
    """Channel weight overrides for a ``rank_by`` mode.

    Returns ``{"recency": w}`` with w = 0.0 for "relevance" (recency ignored),
    0.5 for "balanced" and 2.0 for "freshness". Merge it over the base weights.
    """
    try:
        return {"recency": RANK_BY_RECENCY_WEIGHT[rank_by]}
    except KeyError:
        choices = ", ".join(sorted(RANK_BY_RECENCY_WEIGHT))
        raise ValueError(f"rank_by must be one of {choices}, got {rank_by!r}") from None
