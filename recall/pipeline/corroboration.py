"""Corroboration: a row drawn from a message backs the message up.

Consolidation restates a message as observations (one per statement), so one turn
can reach the ranking several times: the message itself and each observation drawn
from it, each found by the channels on its own. When both rank, the message -- the
evidence the citations point to -- is better supported than a row that matched
once, and takes a share of the best score among the rows drawn from it:

    score' = score + share * max(score of the rows derived from it)

The derived rows keep their scores (boosting them too lifted two representations of
one turn together and cost more than it gained: docs/benchmarks.md, session 10).
Only rows with exactly one source count (an episode or a topic digest covers many
turns and has its own rule). Measured on LoCoMo and LongMemEval dev; the default
share is ``RecallRequest.corroboration_share``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from recall.pipeline.fusion import apply_adjustments
from recall.pipeline.types import FusedItem


def corroborate(
    items: Sequence[FusedItem], sources: Mapping[int, int], *, share: float
) -> list[FusedItem]:
    """Boost each source row among ``items`` whose derived rows ranked too, and
    re-sort; a boosted item names its best derived row in ``corroborated_by``.

    ``sources`` maps a derived item's id to the single row it was drawn from; the
    factor (boost ``corroborated``) is ``(score + share * best derived) / score``.
    """
    best = _best_derived(items, sources, share)
    if not best:
        return list(items)
    boosted = apply_adjustments(
        items, multipliers={s: {"corroborated": f} for s, (f, _) in best.items()}
    )
    return [
        replace(i, corroborated_by=best[i.memory_id][1]) if i.memory_id in best else i
        for i in boosted
    ]


def _best_derived(
    items: Sequence[FusedItem], sources: Mapping[int, int], share: float
) -> dict[int, tuple[float, int]]:
    """``{source: (factor, best derived id)}``."""
    if share <= 0 or not items:
        return {}
    score = {item.memory_id: item.score for item in items}
    best: dict[int, FusedItem] = {}
    for item in items:
        source = sources.get(item.memory_id)
        if source is None or source == item.memory_id or source not in score:
            continue
        if source not in best or item.score > best[source].score:
            best[source] = item
    return {
        source: ((score[source] + share * top.score) / score[source], top.memory_id)
        for source, top in best.items()
        if score[source] > 0 and top.score > 0
    }
