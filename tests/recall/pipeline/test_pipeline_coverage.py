"""The coverage gate."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.coverage import Coverage, coverage_score, should_exit


def test_coverage_combines_facets_scores_and_tier_diversity():
    coverage = coverage_score(
        facets=["Caroline", "boston", "dog"],
        item_texts=["Caroline moved to Boston.", "She adopted a cat."],
        scores=[0.8, 1.4],
        tiers=["semantic", "episodic"],
    )
    assert coverage.facets_hit == ("caroline", "boston")
    assert coverage.facet == pytest.approx(2 / 3)
    assert coverage.mean_score == pytest.approx(0.9)
    assert coverage.diversity == pytest.approx(2 / 3)
    assert coverage.value == pytest.approx(0.4 * 2 / 3 + 0.3 * 0.9 + 0.3 * 2 / 3)


def test_facets_match_whole_words_only():
    coverage = coverage_score(
        facets=["art", "new york"],
        item_texts=["a party in New  York"],
        scores=[1.0],
        tiers=["episodic"],
    )
    assert coverage.facets_hit == ("new york",)


def test_empty_inputs_give_zero_coverage():
    empty = coverage_score(facets=[], item_texts=[], scores=[], tiers=[])
    assert empty == Coverage(0.0, 0.0, 0.0, 0.0, ())
    no_items = coverage_score(facets=["caroline"], item_texts=[], scores=[], tiers=[])
    assert no_items.value == 0.0


def test_should_exit_needs_both_threshold_and_enough_items():
    good = Coverage(value=0.8, facet=1.0, mean_score=0.5, diversity=0.7)
    assert should_exit(good, 3, threshold=0.75)
    assert not should_exit(good, 2, threshold=0.75)
    assert not should_exit(good, 5, threshold=0.85)


@given(
    st.lists(st.text(max_size=12), max_size=6),
    st.lists(st.text(max_size=40), max_size=6),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
    st.lists(st.sampled_from(["semantic", "episodic", "raw", "topic", ""]), max_size=6),
    st.integers(-1, 5),
)
def test_coverage_always_lies_within_zero_and_one(facets, texts, scores, tiers, tmax):
    coverage = coverage_score(
        facets=facets, item_texts=texts, scores=scores, tiers=tiers, max_tiers=tmax
    )
    for part in (
        coverage.value,
        coverage.facet,
        coverage.mean_score,
        coverage.diversity,
    ):
        assert 0.0 <= part <= 1.0


def test_facet_coverage_asks_one_item_to_hold_the_facets_not_the_items_together():
    scattered = coverage_score(
        facets=["caroline", "research"],
        item_texts=["Caroline attended a mentorship program", "Do your research"],
        scores=[0.6, 0.6],
        tiers=["semantic", "procedural"],
    )
    joint = coverage_score(
        facets=["caroline", "research"],
        item_texts=["Caroline researched adoption agencies", "Caroline did research"],
        scores=[0.6, 0.6],
        tiers=["semantic", "procedural"],
    )
    assert scattered.facet == 0.5 and set(scattered.facets_hit) == {
        "caroline",
        "research",
    }
    assert joint.facet == 1.0
    assert scattered.value < joint.value
