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

from recall.pipeline.types import FusedItem


def corroboration_multipliers(
    items: Sequence[FusedItem],
    sources: Mapping[int, int],
    *,
    share: float,
) -> dict[int, dict[str, float]]:
    """``{id: {"corroborated": factor}}`` for source rows whose derived rows ranked.

    ``sources`` maps a derived item's id to the single row it was drawn from. Only a
    source that is itself among ``items`` is boosted; factors are > 1.
    """
    if share <= 0 or not items:
        return {}
    score = {item.memory_id: item.score for item in items}
    best: dict[int, float] = {}
    for item in items:
        source = sources.get(item.memory_id)
        if source is None or source == item.memory_id or source not in score:
            continue
        best[source] = max(best.get(source, 0.0), item.score)
    return {
        source: {"corroborated": (score[source] + share * top) / score[source]}
        for source, top in best.items()
        if score[source] > 0 and top > 0
    }
