"""Recency decay, rank_by weights, explanations, and the purity of the package."""

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.explain import explain_item
from recall.pipeline.fusion import apply_adjustments, fuse_rrf
from recall.pipeline.recency import rank_by_weights, recency_hits, recency_score
from recall.pipeline.types import Candidate, ChannelHit, FusedItem

NOW = datetime(2023, 6, 15, 12, tzinfo=UTC)


def test_recency_is_one_now_and_in_the_future_and_halves_each_half_life():
    assert recency_score(NOW, now=NOW) == 1.0
    assert recency_score(NOW + timedelta(days=3), now=NOW) == 1.0
    assert recency_score(NOW - timedelta(days=7), now=NOW) == pytest.approx(0.5)
    assert recency_score(NOW - timedelta(days=2), now=NOW, half_life_days=1) == (
        pytest.approx(0.25)
    )


def test_recency_of_ancient_memories_stays_positive():
    ancient = datetime(1900, 1, 1, tzinfo=UTC)
    assert 0.0 < recency_score(ancient, now=NOW, half_life_days=0.01) < 1e-300


@given(st.floats(-1e5, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False))
def test_recency_never_rises_as_memories_get_older(age_hours, extra_hours):
    newer = NOW - timedelta(hours=age_hours)
    older = newer - timedelta(hours=extra_hours)
    newer_score = recency_score(newer, now=NOW)
    older_score = recency_score(older, now=NOW)
    assert 0.0 < older_score <= newer_score <= 1.0


def test_recency_hits_rank_newest_first_and_skip_undated_rows():
    hits = recency_hits(
        [(1, NOW - timedelta(days=9)), (2, None), (3, NOW), (4, NOW)], now=NOW
    )
    assert [(h.memory_id, h.rank) for h in hits] == [(3, 1), (4, 2), (1, 3)]
    assert {h.channel for h in hits} == {"recency"}


def test_rank_by_maps_to_recency_channel_weight():
    assert rank_by_weights("relevance") == {"recency": 0.0}
    assert rank_by_weights("balanced") == {"recency": 0.5}
    assert rank_by_weights("freshness") == {"recency": 2.0}
    with pytest.raises(ValueError):
        rank_by_weights("newest")


def test_explanation_shows_channel_shares_adjustments_and_is_json():
    fused = fuse_rrf(
        {
            "vector": [ChannelHit("vector", 7, rank=1, score=0.91)],
            "lexical": [
                ChannelHit("lexical", 7, rank=3, score=4.2, detail={"terms": ["dog"]})
            ],
        },
        {"vector": 1.0, "lexical": 1.0},
        phase=2,
    )
    (item,) = apply_adjustments(fused, multipliers={7: {"stale": 0.5}})
    explanation = explain_item(
        item,
        weights_used={"vector": 1.0, "lexical": 1.0},
        phase=2,
        window_match=True,
        graph_path=("e:1", "m:7"),
        why_packed="rank 1: 20 tokens fit in the 500 left of 500",
        channel_details={"lexical": {"terms": ("dog",)}},
    )
    assert json.loads(json.dumps(explanation)) == explanation
    channels = explanation["channels"]
    assert channels["vector"]["share"] + channels["lexical"]["share"] == (
        pytest.approx(1.0)
    )
    assert channels["vector"]["share"] > channels["lexical"]["share"]
    assert channels["lexical"]["detail"] == {"terms": ["dog"]}
    assert explanation["penalties"] == {"stale": 0.5}
    assert explanation["graph_path"] == ["e:1", "m:7"]
    assert explanation["phase"] == 2
    assert explanation["window_match"] is True


def test_explanation_of_a_spread_only_item_has_no_channels():
    item = FusedItem(9, 0.01, spread_from={7: 0.01})
    explanation = explain_item(
        item,
        weights_used={},
        phase=2,
        window_match=None,
        graph_path=None,
        why_packed="",
        channel_details={},
    )
    assert explanation["channels"] == {}
    assert explanation["spread_from"] == {"7": 0.01}
    json.dumps(explanation)


def test_value_types_are_frozen_and_hashable():
    candidate = Candidate(1, "episodic", "message", "hi", extra={"a": 1})
    with pytest.raises(AttributeError):
        candidate.content = "changed"  # type: ignore[misc]
    assert hash(candidate) == hash(Candidate(1, "episodic", "message", "hi"))
    assert hash(FusedItem(1, 0.5, boosts={"x": 2.0})) is not None


def test_the_pipeline_imports_no_django_or_database_code():
    code = (
        "import sys, recall.pipeline.coverage, recall.pipeline.explain, "
        "recall.pipeline.fusion, recall.pipeline.graph, recall.pipeline.intent, "
        "recall.pipeline.mmr, recall.pipeline.packing, recall.pipeline.recency;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'celery', 'pgvector', 'psycopg', 'psycopg2'}];"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
