"""MMR reordering and near-duplicate removal."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.mmr import jaccard, mmr_dedupe
from recall.pipeline.types import FusedItem


def test_jaccard_compares_lowercase_word_sets():
    assert jaccard("The cat sat", "the CAT sat!") == 1.0
    assert jaccard("a b", "b c") == pytest.approx(1 / 3)
    assert jaccard("", "") == 0.0
    assert jaccard("word", "") == 0.0


def test_mmr_drops_a_near_duplicate_and_reports_what_it_kept():
    items = [FusedItem(1, 0.9), FusedItem(2, 0.8), FusedItem(3, 0.7)]
    texts = {
        1: "Caroline moved to Boston in May",
        2: "caroline moved to boston in may!",
        3: "Melanie paints sunsets",
    }
    kept, dropped = mmr_dedupe(items, texts)
    assert [item.memory_id for item in kept] == [1, 3]
    assert dropped == [(2, 1)]


def test_mmr_prefers_diverse_items_over_similar_ones():
    items = [FusedItem(1, 1.0), FusedItem(2, 0.9), FusedItem(3, 0.85)]
    texts = {
        1: "caroline adopted a dog named max",
        2: "caroline adopted a dog named max yesterday",
        3: "melanie ran a marathon",
    }
    kept, dropped = mmr_dedupe(items, texts, lambda_=0.5, jaccard_threshold=0.95)
    assert [item.memory_id for item in kept] == [1, 3, 2]
    assert dropped == []


def test_mmr_similarity_ignores_function_words():
    # Item 2 shares only function words with item 1 ("I", "the", "to", "my", "a",
    # "was"): on every word its Jaccard with item 1 is 0.47, which used to demote it
    # below the weaker item 3; on content words the two share nothing.
    items = [FusedItem(1, 1.0), FusedItem(2, 0.52), FusedItem(3, 0.5)]
    items.append(FusedItem(4, 0.0))
    texts = {
        1: "I went to the beach with my sister and it was a sunny day",
        2: "I drove to the museum with my uncle and it was a rainy evening",
        3: "Museum tickets cost twenty dollars",
        4: "unrelated filler",
    }
    kept, dropped = mmr_dedupe(items, texts, lambda_=0.7, jaccard_threshold=0.85)
    assert [item.memory_id for item in kept][:3] == [1, 2, 3]
    assert dropped == []
    # Content words still count: a second beach-with-sister row is demoted.
    texts[2] = "my sister and I loved the sunny beach day"
    kept, _ = mmr_dedupe(items, texts, lambda_=0.7, jaccard_threshold=0.85)
    assert [item.memory_id for item in kept][:3] == [1, 3, 2]


def test_mmr_rejects_a_threshold_outside_0_1():
    with pytest.raises(ValueError, match="jaccard_threshold"):
        mmr_dedupe([FusedItem(1, 1.0)], {1: "x"}, jaccard_threshold=0)


def test_mmr_near_duplicates_are_judged_on_every_word():
    # Same content words, different people: not duplicates (kept, just demoted).
    items = [FusedItem(1, 1.0), FusedItem(2, 0.9)]
    texts = {1: "I went to Paris", 2: "They went to Paris"}
    kept, dropped = mmr_dedupe(items, texts)
    assert [item.memory_id for item in kept] == [1, 2]
    assert dropped == []


def test_mmr_respects_limit():
    items = [FusedItem(i, 1.0 / i) for i in range(1, 6)]
    kept, _ = mmr_dedupe(items, {i: f"text {i}" for i in range(1, 6)}, limit=2)
    assert [item.memory_id for item in kept] == [1, 2]
    assert mmr_dedupe(items, {}, limit=0) == ([], [])


words = st.sampled_from(["cat", "dog", "park", "boston", "paint", "run", "max"])
texts_strategy = st.lists(words, min_size=0, max_size=5).map(" ".join)


@st.composite
def shortlists(draw):
    ids = draw(st.lists(st.integers(1, 200), unique=True, min_size=1, max_size=25))
    scores = sorted(
        draw(st.lists(st.floats(0, 1), min_size=len(ids), max_size=len(ids))),
        reverse=True,
    )
    items = [FusedItem(i, s) for i, s in zip(ids, scores, strict=True)]
    texts = {i: draw(texts_strategy) for i in ids}
    return items, texts


@given(
    shortlists(),
    st.floats(0, 1),
    st.floats(0.1, 1),
    st.one_of(st.none(), st.integers(1, 30)),
)
def test_mmr_keeps_top_item_returns_subset_and_accounts_for_drops(
    shortlist, lambda_, threshold, limit
):
    items, texts = shortlist
    kept, dropped = mmr_dedupe(
        items, texts, lambda_=lambda_, jaccard_threshold=threshold, limit=limit
    )
    kept_ids = [item.memory_id for item in kept]
    assert kept_ids[0] == items[0].memory_id
    assert len(set(kept_ids)) == len(kept_ids)
    assert set(kept_ids) <= {item.memory_id for item in items}
    if limit is not None:
        assert len(kept) <= limit
    for dropped_id, kept_id in dropped:
        assert dropped_id not in kept_ids
        assert kept_id in kept_ids
        assert jaccard(texts[dropped_id], texts[kept_id]) >= threshold
    if limit is None:
        assert len(kept) + len(dropped) == len(items)


@given(shortlists())
def test_mmr_is_deterministic(shortlist):
    items, texts = shortlist
    assert mmr_dedupe(items, texts) == mmr_dedupe(list(items), dict(texts))
