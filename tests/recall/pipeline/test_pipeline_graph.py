"""Personalised PageRank and explain paths over the entity graph."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.graph import best_paths, personalized_pagerank

CHAIN = [
    ("e:1", "m:1", 1.0),
    ("m:1", "e:2", 1.0),
    ("e:2", "m:2", 1.0),
    ("m:2", "e:3", 1.0),
    ("e:3", "m:3", 1.0),
]


def test_a_seeds_neighbours_outrank_far_nodes():
    scores = personalized_pagerank(CHAIN, {"e:1": 1.0})
    assert scores["m:1"] > scores["m:2"] > scores["m:3"]


def test_scores_sum_to_one_even_with_dangling_seeds():
    scores = personalized_pagerank(CHAIN, {"e:1": 1.0, "e:99": 3.0})
    assert sum(scores.values()) == pytest.approx(1.0)
    assert "e:99" in scores


def test_pagerank_respects_max_iter():
    one_step = personalized_pagerank(CHAIN, {"e:1": 1.0}, max_iter=1)
    assert set(one_step) == {"e:1", "m:1"}
    zero_steps = personalized_pagerank(CHAIN, {"e:1": 1.0}, max_iter=0)
    assert zero_steps == {"e:1": 1.0}


def test_empty_or_zero_seeds_give_no_scores():
    assert personalized_pagerank(CHAIN, {}) == {}
    assert personalized_pagerank(CHAIN, {"e:1": 0.0}) == {}


def test_unreachable_nodes_get_no_score():
    edges = [*CHAIN, ("e:50", "m:50", 1.0)]
    assert "m:50" not in personalized_pagerank(edges, {"e:1": 1.0})


def test_fanout_cap_keeps_only_the_heaviest_edges():
    hub = [("e:hub", f"m:{i}", 1.0) for i in range(10)] + [("e:hub", "m:heavy", 5.0)]
    scores = personalized_pagerank(hub, {"e:hub": 1.0}, max_fanout=1)
    assert set(scores) == {"e:hub", "m:heavy"}


@given(
    st.lists(
        st.tuples(
            st.sampled_from([f"n:{i}" for i in range(8)]),
            st.sampled_from([f"n:{i}" for i in range(8)]),
            st.floats(0.0, 5.0),
        ),
        max_size=25,
    ),
    st.dictionaries(
        st.sampled_from([f"n:{i}" for i in range(8)]), st.floats(0.1, 2), min_size=1
    ),
)
def test_pagerank_scores_are_a_probability_distribution(edges, seeds):
    scores = personalized_pagerank(edges, seeds)
    assert sum(scores.values()) == pytest.approx(1.0)
    assert all(score > 0 for score in scores.values())


def test_best_paths_find_a_shortest_path_from_a_seed():
    paths = best_paths(CHAIN, ["e:1"], ["m:2", "e:1", "m:3", "x:0"], max_depth=3)
    assert paths == {"m:2": ("e:1", "m:1", "e:2", "m:2"), "e:1": ("e:1",)}


def test_best_paths_start_from_the_nearest_seed():
    paths = best_paths(CHAIN, ["e:1", "e:3"], ["m:2"])
    assert paths["m:2"] == ("e:3", "m:2")
