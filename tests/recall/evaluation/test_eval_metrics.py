"""Unit tests for recall.evaluation.metrics with hand-computed values."""

import json
import math

import pytest

from recall.evaluation.metrics import (
    QuestionResult,
    aggregate,
    dedupe,
    gold_ranks,
    hit_at_k,
    mrr,
    ndcg_any_at_k,
    ndcg_at_k,
    percentile,
    recall_all_at_k,
    recall_at_k,
    render_markdown,
    report_to_json,
    sessions_from_turns,
)

RANKED = ["a", "b", "a", "c", "d", "e"]  # deduped: a b c d e
GOLD = {"c", "x"}


def test_dedupe_keeps_first_occurrence():
    assert dedupe(RANKED) == ["a", "b", "c", "d", "e"]


def test_recall_counts_gold_fraction_after_dedupe():
    assert recall_at_k(RANKED, GOLD, 2) == 0.0
    assert recall_at_k(RANKED, GOLD, 3) == 0.5  # c is 3rd once "a" is deduped
    assert recall_at_k(["c", "x"], GOLD, 2) == 1.0


def test_recall_all_and_hit():
    assert recall_all_at_k(RANKED, GOLD, 5) == 0.0
    assert recall_all_at_k(["x", "q", "c"], GOLD, 3) == 1.0
    assert recall_all_at_k(["x", "q", "c"], GOLD, 2) == 0.0
    assert hit_at_k(RANKED, GOLD, 2) == 0.0
    assert hit_at_k(RANKED, GOLD, 3) == 1.0


def test_ndcg_binary_with_ideal_over_min_gold_k():
    # one hit at rank 3: DCG = 1/log2(4) = 0.5; ideal (2 gold) = 1 + 1/log2(3)
    expected = 0.5 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(expected)
    assert ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(0.306573, abs=1e-6)
    # ideal is capped at k: 2 gold, k=1, hit at rank 1 -> 1.0
    assert ndcg_at_k(["x", "c"], GOLD, 1) == 1.0
    assert ndcg_at_k(["z"], GOLD, 1) == 0.0


def test_ndcg_any_is_longmemeval_official_discount():
    # official dcg: rel[0] + sum(rel[1:] / log2(arange(2, n+1))): ranks 1 and 2
    # both weigh 1, so a single gold at rank 2 scores 1.0 (textbook: 1/log2(3))
    assert ndcg_any_at_k(["a", "b"], {"b"}, 2) == 1.0
    assert ndcg_at_k(["a", "b"], {"b"}, 2) == pytest.approx(1 / math.log2(3))
    # hit at rank 3 of 2 gold: (1/log2 3) / (1 + 1)
    assert ndcg_any_at_k(RANKED, GOLD, 3) == pytest.approx(0.315465, abs=1e-6)


def test_mrr_and_gold_ranks():
    assert mrr(RANKED, GOLD) == pytest.approx(1 / 3)
    assert mrr(["q"], GOLD) == 0.0
    assert gold_ranks(RANKED, GOLD) == {"c": 3, "x": None}


def test_empty_gold_or_bad_k_is_an_error():
    with pytest.raises(ValueError):
        recall_at_k(RANKED, set(), 5)
    with pytest.raises(ValueError):
        mrr(RANKED, set())
    with pytest.raises(ValueError):
        ndcg_at_k(RANKED, GOLD, 0)


def test_question_result_derives_session_ranking_from_turns():
    r = QuestionResult(
        question_id="q",
        category="1",
        ranked_turns=["D2:1", "D1:4", "D2:3", "s:x:0"],
        gold_turns={"D1:4"},
        gold_sessions={"D1"},
    )
    assert r.ranked_sessions == ("D2", "D1", "s:x")
    assert sessions_from_turns(["a_1:0", "a_1:1"]) == ("a_1",)
    explicit = QuestionResult(
        question_id="q",
        category="1",
        ranked_turns=("D2:1",),
        ranked_sessions=("D9",),
        gold_turns=frozenset(),
        gold_sessions=frozenset(),
    )
    assert explicit.ranked_sessions == ("D9",)


def _locomo_results():
    return [
        QuestionResult(  # multi-hop, 2 gold: one at rank 1, one missing
            question_id="c:q0",
            category="1",
            ranked_turns=("D1:1", "D2:1", "D2:2"),
            gold_turns=frozenset({"D1:1", "D3:1"}),
            gold_sessions=frozenset({"D1", "D3"}),
            latency_ms=10.0,
        ),
        QuestionResult(  # adversarial, gold at rank 2
            question_id="c:q1",
            category="5",
            ranked_turns=("D2:1", "D1:2"),
            gold_turns=frozenset({"D1:2"}),
            gold_sessions=frozenset({"D1"}),
            latency_ms=30.0,
        ),
        QuestionResult(  # no evidence: not scored
            question_id="c:q2",
            category="3",
            ranked_turns=("D1:1",),
            gold_turns=frozenset(),
            gold_sessions=frozenset(),
        ),
    ]


def test_aggregate_locomo_rows_and_values():
    report = aggregate(_locomo_results(), benchmark="locomo", k_values=(5, 10))
    assert report.columns == (
        "turn recall@5",
        "turn recall@10",
        "turn ndcg@10",
        "turn mrr",
        "session hit@1",
        "session mrr",
    )
    labels = [row.label for row in report.rows]
    assert labels == ["1:multi-hop", "5:adversarial", "cats 1-4", "overall"]
    assert report.n_skipped == 1
    rows = {row.label: row for row in report.rows}
    multi = rows["1:multi-hop"].metrics
    assert multi["turn recall@5"] == 0.5
    assert multi["turn ndcg@10"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert multi["session hit@1"] == 1.0
    adv = rows["5:adversarial"].metrics
    assert adv["turn mrr"] == 0.5
    assert adv["session hit@1"] == 0.0  # sessions D2, D1
    overall = rows["overall"]
    assert overall.n == 2
    assert overall.metrics["turn recall@10"] == pytest.approx(0.75)
    assert overall.metrics["turn mrr"] == pytest.approx(0.75)
    assert report.latency_ms == {"p50": 20.0, "p95": 29.0, "p99": pytest.approx(29.8)}


def test_aggregate_longmemeval_turn_and_session_levels():
    result = QuestionResult(
        question_id="q1",
        category="multi-session",
        ranked_turns=("s1:0", "s2:0", "s3:2"),
        ranked_sessions=("s3", "s1"),
        gold_turns=frozenset({"s1:0", "s3:2"}),
        gold_sessions=frozenset({"s1", "s3"}),
    )
    report = aggregate([result], benchmark="longmemeval", k_values=(2, 3))
    m = report.rows[-1].metrics
    assert [row.label for row in report.rows] == ["multi-session", "overall"]
    assert m["turn recall_all@2"] == 0.0
    assert m["turn recall_all@3"] == 1.0
    assert m["turn ndcg@3"] == pytest.approx(
        (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )
    assert m["turn ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert m["turn mrr"] == 1.0
    assert m["session recall_all@2"] == 1.0
    assert m["session ndcg@2"] == 1.0


def test_render_markdown_and_json():
    results = _locomo_results()
    report = aggregate(results, benchmark="locomo")
    md = render_markdown(report)
    assert md.splitlines()[0].startswith("| group | n | turn recall@5 |")
    assert "| overall | 2 | 0.750 |" in md
    assert "skipped (no gold): 1" in md
    data = report_to_json(report, results)
    json.dumps(data)  # serialisable
    q0 = data["questions"][0]
    assert q0["gold_turn_ranks"] == {"D1:1": 1, "D3:1": None}
    assert q0["gold_session_ranks"] == {"D1": 1, "D3": None}
    assert q0["metrics"]["turn recall@5"] == 0.5
    assert data["questions"][2]["scored"] is False
    assert "metrics" not in data["questions"][2]
    assert data["rows"][-1]["group"] == "overall"


def test_percentile_interpolates():
    assert percentile([40, 10, 30, 20], 50) == 25
    assert percentile([5.0], 99) == 5.0


def test_aggregate_rejects_bad_arguments():
    with pytest.raises(ValueError):
        aggregate([], benchmark="beam")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        aggregate([], benchmark="locomo", k_values=())
    empty = aggregate([], benchmark="longmemeval")
    assert (empty.rows, empty.columns, empty.n_skipped) == ((), (), 0)
