"""The honest no-match gate as a pure function (no database)."""

from __future__ import annotations

from recall.pipeline.relevance import min_terms_for, relevance_gate
from recall.pipeline.types import ChannelHit, FusedItem


def hit(channel: str, mid: int, score: float, **detail: int) -> ChannelHit:
    return ChannelHit(channel, mid, 1, score, detail)


def test_items_clear_by_cosine_by_two_terms_or_as_neighbours_of_items_that_clear():
    items = [
        FusedItem(1, 0.9),
        FusedItem(2, 0.8),
        FusedItem(3, 0.7),
        FusedItem(4, 0.6, spread_from={1: 0.1}),
        FusedItem(5, 0.5),
        FusedItem(6, 0.4, spread_from={5: 0.1}),
    ]
    hits = {
        1: {"vector": hit("vector", 1, 0.62)},
        2: {"lexical": hit("lexical", 2, 3.0, matched_terms=2)},
        3: {
            "lexical": hit("lexical", 3, 9.0, matched_terms=1),
            "graph": hit("graph", 3, 0.9),
        },
        5: {"vector:v1": hit("vector:v1", 5, 0.1)},
    }
    gate = relevance_gate(items, hits, min_score=0.3, min_terms=2, vector_window=True)
    assert [i.memory_id for i in gate.kept] == [1, 2, 4]
    assert [i.memory_id for i in gate.dropped] == [3, 5, 6]
    assert gate.reasons[4] == "neighbour of 1"


def test_temporal_hits_count_only_when_the_window_was_searched_by_vector():
    items = [FusedItem(1, 1.0)]
    hits = {1: {"temporal": hit("temporal", 1, 1.0)}}
    assert not relevance_gate(
        items, hits, min_score=0.3, min_terms=2, vector_window=False
    ).kept
    assert relevance_gate(
        items, hits, min_score=0.3, min_terms=2, vector_window=True
    ).kept


def test_rows_inside_the_window_clear_at_the_window_factor_of_min_score():
    items = [FusedItem(1, 1.0), FusedItem(2, 0.9)]
    hits = {
        1: {"temporal": hit("temporal", 1, 0.2)},
        2: {"vector": hit("vector", 2, 0.2)},
    }
    gate = relevance_gate(
        items, hits, min_score=0.3, min_terms=2, vector_window=True, window_factor=0.5
    )
    assert [i.memory_id for i in gate.kept] == [1]
    assert gate.reasons[1] == "temporal cosine 0.200 >= 0.15 inside the window"
    assert not relevance_gate(
        items, hits, min_score=0.3, min_terms=2, vector_window=True
    ).kept


def test_a_one_term_query_needs_its_one_term():
    assert min_terms_for(1) == 1 and min_terms_for(5) == 2 and min_terms_for(0) == 1
