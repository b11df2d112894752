"""Maximal marginal relevance reordering with near-duplicate removal."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from recall.pipeline.intent import STOPWORDS
from recall.pipeline.types import FusedItem

_WORD = re.compile(r"\w+")


def word_set(text: str) -> frozenset[str]:
    """Return the set of lowercase ``\\w+`` words in ``text``."""
    return frozenset(_WORD.findall(text.lower()))


def _jaccard_sets(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the lowercase word sets of ``a`` and ``b``.

    Two texts without any word are treated as unrelated (0.0), so empty rows
    are never collapsed into each other as duplicates.
    """
    return _jaccard_sets(word_set(a), word_set(b))


def mmr_dedupe(
    items: Sequence[FusedItem],
    texts: Mapping[int, str],
    *,
    lambda_: float = 0.7,
    jaccard_threshold: float = 0.85,
    limit: int | None = None,
) -> tuple[list[FusedItem], list[tuple[int, int]]]:
    """Reorder ``items`` by MMR and drop near-duplicates.

    ``items`` must be in rank order; the first one is always kept first.
    Relevance is the fused score min-max normalised over ``items``; similarity is
    the Jaccard of content words (stopwords removed: two long messages share "I",
    "the" and "to" whatever they are about, and that overlap demoted answers below
    unrelated rows; docs/benchmarks.md, session 16). Each step picks the remaining
    item maximising ``lambda_ * relevance - (1 - lambda_) * max_similarity`` (ties
    go to the earlier item). An item whose Jaccard over *every* word with a selected
    item reaches ``jaccard_threshold`` is dropped as a near-duplicate and reported
    as ``(dropped_id, kept_id)``, so texts differing only in function words ("I
    went" / "They went") are kept apart. At most ``limit`` items are returned. This
    is O(n^2): use it on the final shortlist (about 100 items), not on raw channel
    output.
    """
    if not 0 < jaccard_threshold <= 1:
        raise ValueError(f"jaccard_threshold must be in (0, 1]: {jaccard_threshold}")
    if not items:
        return [], []
    if limit is not None and limit <= 0:
        return [], []
    scores = [item.score for item in items]
    low, high = min(scores), max(scores)
    spread = high - low
    relevance = [(s - low) / spread if spread > 0 else 1.0 for s in scores]
    words = [word_set(texts.get(item.memory_id, "")) for item in items]
    content = [w - STOPWORDS for w in words]

    max_sim = [0.0] * len(items)
    remaining = list(range(1, len(items)))
    selected = [0]
    dropped: list[tuple[int, int]] = []
    cap = len(items) if limit is None else limit

    def absorb(chosen: int) -> None:
        """Update similarities against the newly selected item; drop duplicates."""
        nonlocal remaining
        keep = []
        # _jaccard_sets inlined: this loop runs ~1,000 times a recall.
        base, base_content = words[chosen], content[chosen]
        n_base, n_content = len(base), len(base_content)
        # Jaccard <= the smaller set's size over the larger's: most pairs fail that
        # bound, so the duplicate test rarely needs an intersection.
        shortest = n_base * jaccard_threshold - 1e-9
        longest = n_base / jaccard_threshold + 1e-9
        for index in remaining:
            other = words[index]
            n_other = len(other)
            if n_base and shortest <= n_other <= longest:
                inter = len(other & base)
                if inter / (n_base + n_other - inter) >= jaccard_threshold:
                    dropped.append((items[index].memory_id, items[chosen].memory_id))
                    continue
            other = content[index]
            if n_content and other:
                inter = len(other & base_content)
                sim = inter / (n_content + len(other) - inter)
            else:
                sim = 0.0
            if sim > max_sim[index]:
                max_sim[index] = sim
            keep.append(index)
        remaining = keep

    absorb(0)
    while remaining and len(selected) < cap:
        best_index = remaining[0]
        best_value = float("-inf")
        for index in remaining:
            value = lambda_ * relevance[index] - (1.0 - lambda_) * max_sim[index]
            if value > best_value:
                best_index, best_value = index, value
        remaining.remove(best_index)
        selected.append(best_index)
        absorb(best_index)
    return [items[index] for index in selected], dropped
