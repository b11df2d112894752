"""Weighted RRF, score adjustments and neighbour spreading."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.fusion import apply_adjustments, fuse_rrf, spread_to_neighbors
from recall.pipeline.types import ChannelHit, FusedItem


def hits(channel, ids):
    return [
        ChannelHit(channel=channel, memory_id=memory_id, rank=rank, score=1.0 / rank)
        for rank, memory_id in enumerate(ids, start=1)
    ]


def order(items):
    return [item.memory_id for item in items]


channel_names = st.sampled_from(["vector", "lexical", "temporal", "graph", "recency"])
ranked_ids = st.lists(st.integers(1, 40), unique=True, max_size=15)
rankings_strategy = st.dictionaries(channel_names, ranked_ids, max_size=5)
weights_strategy = st.dictionaries(
    channel_names, st.sampled_from([0.0, 0.5, 1.0, 2.0]), max_size=5
)


def test_rrf_score_is_sum_of_weighted_reciprocal_ranks():
    fused = fuse_rrf(
        {"vector": hits("vector", [1, 2]), "lexical": hits("lexical", [2])},
        {"vector": 1.0, "lexical": 2.0},
        k=60,
        phase=2,
    )
    by_id = {item.memory_id: item for item in fused}
    assert by_id[2].score == pytest.approx(1 / 62 + 2 / 61)
    assert by_id[1].score == pytest.approx(1 / 61)
    assert order(fused) == [2, 1]
    assert by_id[2].phase == 2
    lexical = next(c for c in by_id[2].contributions if c.channel == "lexical")
    assert (lexical.rank, lexical.weight, lexical.rrf) == (1, 2.0, 2 / 61)


def test_rrf_counts_missing_weight_as_one_and_ignores_zero_weight():
    fused = fuse_rrf(
        {"vector": hits("vector", [1]), "recency": hits("recency", [2])},
        {"recency": 0.0},
    )
    assert order(fused) == [1]
    assert fused[0].contributions[0].weight == 1.0


def test_rrf_keeps_best_rank_of_a_duplicate_hit():
    duplicated = [
        ChannelHit("vector", 5, rank=3, score=0.2),
        ChannelHit("vector", 5, rank=1, score=0.9),
    ]
    (item,) = fuse_rrf({"vector": duplicated}, {})
    assert item.contributions[0].rank == 1
    assert item.score == pytest.approx(1 / 61)


def test_rrf_rejects_zero_based_ranks():
    with pytest.raises(ValueError):
        fuse_rrf({"vector": [ChannelHit("vector", 1, rank=0, score=1.0)]}, {})


def test_rrf_breaks_ties_by_memory_id():
    fused = fuse_rrf(
        {"a": hits("a", [9]), "b": hits("b", [3]), "c": hits("c", [5])}, {}
    )
    assert order(fused) == [3, 5, 9]


@given(rankings_strategy, weights_strategy, st.data())
def test_rrf_output_does_not_depend_on_channel_order(rankings, weights, data):
    channels = list(rankings)
    shuffled = data.draw(st.permutations(channels))
    original = fuse_rrf({c: hits(c, rankings[c]) for c in channels}, weights)
    permuted = fuse_rrf({c: hits(c, rankings[c]) for c in shuffled}, weights)
    assert original == permuted


@given(rankings_strategy, weights_strategy)
def test_rrf_orders_by_score_then_id(rankings, weights):
    fused = fuse_rrf({c: hits(c, ids) for c, ids in rankings.items()}, weights)
    keys = [(-item.score, item.memory_id) for item in fused]
    assert keys == sorted(keys)
    assert len(set(order(fused))) == len(fused)


@given(rankings_strategy, weights_strategy, st.integers(1, 40))
def test_adding_a_channel_that_ranks_only_x_never_lowers_x(rankings, weights, x):
    rankings = {c: hits(c, ids) for c, ids in rankings.items()}
    before = order(fuse_rrf(rankings, weights))
    after = order(fuse_rrf({**rankings, "boost_x": hits("boost_x", [x])}, weights))
    assert x in after
    if x in before:
        above_before = set(before[: before.index(x)])
        above_after = set(after[: after.index(x)])
        assert above_after <= above_before


def test_adjustments_apply_boosts_and_penalties_and_resort():
    items = [FusedItem(1, 1.0), FusedItem(2, 0.8), FusedItem(3, 0.5)]
    adjusted = apply_adjustments(
        items, multipliers={1: {"stale": 0.5}, 3: {"answer_type": 2.0, "noop": 1.0}}
    )
    assert order(adjusted) == [3, 2, 1]
    by_id = {item.memory_id: item for item in adjusted}
    assert by_id[1].penalties == {"stale": 0.5}
    assert by_id[3].boosts == {"answer_type": 2.0}
    assert by_id[3].score == pytest.approx(1.0)
    assert by_id[2] == items[1]


def test_adjustments_break_ties_by_id_and_reject_negative_factors():
    items = [FusedItem(7, 1.0), FusedItem(4, 2.0)]
    assert order(apply_adjustments(items, multipliers={4: {"stale": 0.5}})) == [4, 7]
    with pytest.raises(ValueError):
        apply_adjustments(items, multipliers={4: {"bad": -1.0}})


def test_spreading_creates_neighbours_and_records_the_source():
    items = [FusedItem(10, 1.0, phase=2), FusedItem(20, 0.1)]
    spread = spread_to_neighbors(items, {10: [9, 11, 10], 20: [11]}, share=0.3)
    by_id = {item.memory_id: item for item in spread}
    assert by_id[9].score == pytest.approx(0.3)
    assert by_id[9].contributions == ()
    assert by_id[9].phase == 2
    assert by_id[11].spread_from == pytest.approx({10: 0.3, 20: 0.03})
    assert by_id[10].score == pytest.approx(1.0)
    assert order(spread) == [10, 11, 9, 20]


def test_spreading_uses_original_scores_and_respects_max_sources():
    items = [FusedItem(1, 1.0), FusedItem(2, 0.5)]
    spread = spread_to_neighbors(items, {1: [2], 2: [1]}, share=0.5, max_sources=1)
    by_id = {item.memory_id: item for item in spread}
    assert by_id[1].score == pytest.approx(1.0)
    assert by_id[2].score == pytest.approx(1.0)
    assert by_id[2].spread_from == {1: 0.5}


def test_spreading_with_zero_share_changes_nothing():
    items = [FusedItem(1, 1.0), FusedItem(2, 0.5)]
    assert spread_to_neighbors(items, {1: [2, 3]}, share=0.0) == items
    with pytest.raises(ValueError):
        spread_to_neighbors(items, {}, share=1.5)


@given(rankings_strategy, st.floats(0.0, 1.0))
def test_spreading_never_lowers_a_score(rankings, share):
    fused = fuse_rrf({c: hits(c, ids) for c, ids in rankings.items()}, {})
    neighbours = {item.memory_id: [item.memory_id + 1] for item in fused}
    spread = {
        i.memory_id: i.score
        for i in spread_to_neighbors(fused, neighbours, share=share)
    }
    for item in fused:
        assert spread[item.memory_id] >= item.score
    assert all(math.isfinite(score) for score in spread.values())
