"""Retrieval metrics and reports for the ``evaluate`` command (pure Python).

Every metric takes a ranked list of ids (best first) and a non-empty gold set.
Rankings are de-duplicated keeping the first occurrence (a memory cited twice
must not count twice), ranks are 1-based.

Two NDCG variants exist:

* :func:`ndcg_at_k` is the textbook binary NDCG (gain at rank r is
  ``1 / log2(r + 1)``, ideal DCG over ``min(|gold|, k)`` hits). It reproduces
  the BM25 floors in ``BENCHMARKS.md`` for both LoCoMo and LongMemEval.
* :func:`ndcg_any_at_k` is LongMemEval's official ``ndcg_any`` (``eval_utils.dcg``
  in xiaowu0162/LongMemEval): gain 1 at ranks 1 **and** 2, then
  ``1 / log2(r)``. It is reported alongside for comparison with the paper.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from recall.evaluation.datasets import LOCOMO_CATEGORY_NAMES, session_of_turn

Benchmark = Literal["locomo", "longmemeval"]


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Return ``ranked`` without repeats, keeping first occurrences."""
    return list(dict.fromkeys(ranked))


def _check(gold: Iterable[str], k: int | None = None) -> set[str]:
    gold = set(gold)
    if not gold:
        raise ValueError("gold set is empty (skip the question instead)")
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return gold


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Fraction of gold ids in the top ``k`` (LoCoMo's "recall accuracy")."""
    gold = _check(gold, k)
    return len(gold.intersection(dedupe(ranked)[:k])) / len(gold)


def recall_all_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 if every gold id is in the top ``k`` (LongMemEval ``recall_all``)."""
    gold = _check(gold, k)
    return float(gold <= set(dedupe(ranked)[:k]))


def hit_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 if any gold id is in the top ``k`` (LongMemEval ``recall_any``)."""
    gold = _check(gold, k)
    return float(not gold.isdisjoint(dedupe(ranked)[:k]))


def _ndcg(
    ranked: Sequence[str], gold: set[str], k: int, gain: Callable[[int], float]
) -> float:
    top = dedupe(ranked)[:k]
    dcg = sum(gain(r) for r, item in enumerate(top, start=1) if item in gold)
    ideal = sum(gain(r) for r in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def ndcg_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Binary NDCG@k, gain ``1/log2(rank+1)``, ideal over ``min(|gold|, k)``."""
    return _ndcg(ranked, _check(gold, k), k, lambda r: 1.0 / math.log2(r + 1))


def ndcg_any_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """LongMemEval's official ``ndcg_any@k`` (gain 1 at ranks 1-2, ``1/log2 r``)."""
    return _ndcg(ranked, _check(gold, k), k, lambda r: 1.0 / math.log2(max(r, 2)))


def mrr(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """Reciprocal rank of the first gold id; 0.0 if none is retrieved."""
    gold = _check(gold)
    for rank, item in enumerate(dedupe(ranked), start=1):
        if item in gold:
            return 1.0 / rank
    return 0.0


def gold_ranks(ranked: Sequence[str], gold: Iterable[str]) -> dict[str, int | None]:
    """Map each gold id (sorted) to its 1-based rank, ``None`` if not retrieved."""
    pos = {item: r for r, item in enumerate(dedupe(ranked), start=1)}
    return {g: pos.get(g) for g in sorted(set(gold))}


def sessions_from_turns(ranked_turns: Iterable[str]) -> tuple[str, ...]:
    """Session ranking = order of first appearance of sessions in a turn ranking."""
    return tuple(dedupe(session_of_turn(t) for t in ranked_turns))


@dataclass(frozen=True, kw_only=True)
class QuestionResult:
    """The ranked evidence returned for one question, with its gold.

    ``ranked_sessions`` defaults to :func:`sessions_from_turns` of
    ``ranked_turns``; pass it explicitly when sessions are ranked on their own.
    ``ranked_turns`` must contain only retrieval keys of the benchmark
    (LongMemEval: user turns, see ``BenchConversation.key_turn_ids``).
    """

    question_id: str
    category: str
    ranked_turns: tuple[str, ...]
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    ranked_sessions: tuple[str, ...] = ()
    latency_ms: float | None = None

    def __post_init__(self) -> None:
        """Coerce collections; derive ``ranked_sessions`` when not given."""
        set_ = object.__setattr__
        set_(self, "ranked_turns", tuple(self.ranked_turns))
        set_(self, "gold_turns", frozenset(self.gold_turns))
        set_(self, "gold_sessions", frozenset(self.gold_sessions))
        sessions = tuple(self.ranked_sessions) or sessions_from_turns(self.ranked_turns)
        set_(self, "ranked_sessions", sessions)


@dataclass(frozen=True)
class ReportRow:
    """Mean of each metric over the ``n`` questions of a group."""

    label: str
    n: int
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class Report:
    """Aggregated metrics: one row per category, then the overall rows."""

    benchmark: Benchmark
    k_values: tuple[int, ...]
    columns: tuple[str, ...]
    rows: tuple[ReportRow, ...]
    n_skipped: int = 0
    latency_ms: Mapping[str, float] = field(default_factory=dict)


def question_metrics(
    result: QuestionResult, *, benchmark: Benchmark, k_values: Sequence[int] = (5, 10)
) -> dict[str, float]:
    """Per-question metric values keyed by report column name."""
    t, tg = result.ranked_turns, result.gold_turns
    s, sg = result.ranked_sessions, result.gold_sessions
    out: dict[str, float] = {}
    if benchmark == "locomo":
        for k in k_values:
            out[f"turn recall@{k}"] = recall_at_k(t, tg, k)
        out[f"turn ndcg@{max(k_values)}"] = ndcg_at_k(t, tg, max(k_values))
        out["turn mrr"] = mrr(t, tg)
        out["session hit@1"] = hit_at_k(s, sg, 1)
        out["session mrr"] = mrr(s, sg)
        return out
    if benchmark != "longmemeval":
        raise ValueError(f"unknown benchmark {benchmark!r}")
    for level, ranked, gold in (("turn", t, tg), ("session", s, sg)):
        for k in k_values:
            out[f"{level} recall_all@{k}"] = recall_all_at_k(ranked, gold, k)
        for k in k_values:
            out[f"{level} ndcg@{k}"] = ndcg_at_k(ranked, gold, k)
        for k in k_values:
            out[f"{level} ndcg_any@{k}"] = ndcg_any_at_k(ranked, gold, k)
        out[f"{level} mrr"] = mrr(ranked, gold)
    return out


def _is_scored(result: QuestionResult, benchmark: Benchmark) -> bool:
    if benchmark == "locomo":
        return bool(result.gold_turns)
    return bool(result.gold_turns) and bool(result.gold_sessions)


def _category_label(benchmark: Benchmark, category: str) -> str:
    if benchmark == "locomo" and category in LOCOMO_CATEGORY_NAMES:
        return f"{category}:{LOCOMO_CATEGORY_NAMES[category]}"
    return category


def _mean_row(
    label: str, rows: Sequence[Mapping[str, float]], cols: Sequence[str]
) -> ReportRow:
    n = len(rows)
    return ReportRow(label, n, {c: sum(r[c] for r in rows) / n for c in cols})


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def aggregate(
    results: Iterable[QuestionResult],
    *,
    benchmark: Benchmark,
    k_values: Sequence[int] = (5, 10),
) -> Report:
    """Average per-question metrics per category and overall.

    Questions without gold are not scored and are counted in ``n_skipped``.
    LoCoMo gets a ``cats 1-4`` row (the LoCoMo recipe reports category 5
    separately) and an ``overall`` row (categories 1-5, the BENCHMARKS floor).
    """
    if benchmark not in ("locomo", "longmemeval"):
        raise ValueError(f"unknown benchmark {benchmark!r}")
    k_values = tuple(sorted(set(k_values)))
    if not k_values or k_values[0] < 1:
        raise ValueError(f"k_values must be positive integers, got {k_values}")
    results = list(results)
    scored = [r for r in results if _is_scored(r, benchmark)]
    per_q = [
        question_metrics(r, benchmark=benchmark, k_values=k_values) for r in scored
    ]
    columns: tuple[str, ...] = tuple(per_q[0]) if per_q else ()
    groups: dict[str, list[dict[str, float]]] = {}
    for r, m in zip(scored, per_q, strict=True):
        groups.setdefault(r.category, []).append(m)
    rows = [
        _mean_row(_category_label(benchmark, c), groups[c], columns)
        for c in sorted(groups)
    ]
    if benchmark == "locomo":
        core = [m for r, m in zip(scored, per_q, strict=True) if r.category != "5"]
        if core and len(core) != len(per_q):
            rows.append(_mean_row("cats 1-4", core, columns))
    if per_q:
        rows.append(_mean_row("overall", per_q, columns))
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    latency = (
        {f"p{q}": percentile(latencies, q) for q in (50, 95, 99)} if latencies else {}
    )
    return Report(
        benchmark, k_values, columns, tuple(rows), len(results) - len(scored), latency
    )


def render_markdown(report: Report) -> str:
    """Render ``report`` as a Markdown table (plus latency and skip notes)."""
    header = ["group", "n", *report.columns]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    for row in report.rows:
        cells = [row.label, str(row.n)]
        cells += [f"{row.metrics[c]:.3f}" for c in report.columns]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"benchmark: {report.benchmark}; skipped (no gold): {report.n_skipped}"]
    if report.latency_ms:
        lat = ", ".join(f"{k} {v:.1f} ms" for k, v in report.latency_ms.items())
        notes.append(f"recall latency: {lat}")
    return "\n".join(lines + [""] + notes) + "\n"


def report_to_json(report: Report, results: Iterable[QuestionResult]) -> dict[str, Any]:
    """JSON-serialisable report with per-question gold ranks and metrics."""
    questions = []
    for r in results:
        entry: dict[str, Any] = {
            "question_id": r.question_id,
            "category": r.category,
            "scored": _is_scored(r, report.benchmark),
            "gold_turn_ranks": gold_ranks(r.ranked_turns, r.gold_turns),
            "gold_session_ranks": gold_ranks(r.ranked_sessions, r.gold_sessions),
            "top_turns": list(dedupe(r.ranked_turns)[: max(report.k_values)]),
            "latency_ms": r.latency_ms,
        }
        if entry["scored"]:
            entry["metrics"] = question_metrics(
                r,
                benchmark=report.benchmark,
                k_values=report.k_values,
            )
        questions.append(entry)
    return {
        "benchmark": report.benchmark,
        "k_values": list(report.k_values),
        "n_skipped": report.n_skipped,
        "columns": list(report.columns),
        "rows": [{"group": x.label, "n": x.n, **x.metrics} for x in report.rows],
        "latency_ms": dict(report.latency_ms),
        "questions": questions,
    }
