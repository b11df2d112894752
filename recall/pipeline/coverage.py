"""The coverage gate that decides whether a recall phase has found enough."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

FACET_WEIGHT = 0.4
SCORE_WEIGHT = 0.3
DIVERSITY_WEIGHT = 0.3


@dataclass(frozen=True, slots=True)
class Coverage:
    """Coverage of a result set and the three components it is built from."""

    value: float
    facet: float
    mean_score: float
    diversity: float
    facets_hit: tuple[str, ...] = ()


def _clamp(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def _facet_pattern(facet: str) -> re.Pattern[str]:
    # Whole-word match so "art" is not found inside "party"; inner whitespace of
    # multi-word facets (entities such as "new york") may vary.
    words = [re.escape(word) for word in facet.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)")


def coverage_score(
    *,
    facets: Sequence[str],
    item_texts: Sequence[str],
    scores: Sequence[float],
    tiers: Sequence[str],
    max_tiers: int = 3,
) -> Coverage:
    """Score how well items cover a query: ``0.4*facet + 0.3*mean + 0.3*diversity``.

    ``facet`` is the largest fraction of the distinct facets (query keywords and
    entities, compared lowercase and whole-word) that one item text holds: the
    question is whether some item answers the whole query, not whether its words
    are scattered over the items (measured: "What did Caroline research?" exited
    phase 1 on "Caroline attended a mentorship program" plus a rule saying
    "research", and never reached the turn that answers it). With no facets it is
    0, so a query without keywords never exits early on its own. ``facets_hit``
    lists the facets found in any item.
    ``mean_score`` is the mean of the scores, each clamped to [0, 1] (0 when
    there are none). ``diversity`` is distinct tiers over ``max_tiers``, capped
    at 1. Every component and the value lie in [0, 1].
    """
    unique_facets = list(dict.fromkeys(f.strip().lower() for f in facets))
    unique_facets = [f for f in unique_facets if f]
    patterns = [(f, _facet_pattern(f)) for f in unique_facets]
    texts = [text.lower() for text in item_texts if text]
    per_item = [{f for f, p in patterns if p.search(text)} for text in texts]
    hit = tuple(f for f in unique_facets if any(f in found for found in per_item))
    best = max((len(found) for found in per_item), default=0)
    facet = best / len(unique_facets) if unique_facets else 0.0
    clamped = [_clamp(float(s)) for s in scores]
    mean_score = math.fsum(clamped) / len(clamped) if clamped else 0.0
    distinct_tiers = {tier for tier in tiers if tier}
    diversity = len(distinct_tiers) / max_tiers if max_tiers > 0 else 0.0
    facet, mean_score, diversity = (
        _clamp(facet),
        _clamp(mean_score),
        _clamp(diversity),
    )
    value = _clamp(
        FACET_WEIGHT * facet + SCORE_WEIGHT * mean_score + DIVERSITY_WEIGHT * diversity
    )
    return Coverage(
        value=value,
        facet=facet,
        mean_score=mean_score,
        diversity=diversity,
        facets_hit=hit,
    )


def should_exit(
    coverage: Coverage, n_items: int, *, threshold: float, min_items: int = 3
) -> bool:
    """Return True when a phase may stop: enough coverage and enough items."""
    return coverage.value >= threshold and n_items >= min_items
