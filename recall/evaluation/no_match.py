"""How honest is ``no_match``? Measured on LoCoMo through the real write and read paths.

Two stores per conversation, each a fresh organization:

- **full**: the conversation as is. Category 5 (adversarial) questions ask about
  things that were never said; the ``no_match`` rate there is reported beside the
  false no-match rate on categories 1-4 (whose evidence is present).
- **ablated**: a copy with the evidence turns of every other answerable (1-4)
  question removed. Those questions have no evidence in the store ("absent");
  questions whose evidence turns all survived are "present". Questions that lost
  only part of their evidence are left out.

For each ``min_relevance`` threshold: precision of ``no_match`` (of the ablated
recalls that said no_match, the share whose evidence was absent), its recall (the
share of absent questions that said no_match), and the false no-match rate on
present questions. Removing turns does not remove paraphrases elsewhere in the
conversation, so "absent" is an upper bound on what is truly unanswerable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from recall.evaluation import runner
from recall.evaluation.datasets import BenchConversation, BenchQuestion, BenchSession
from recall.services import recall_run
from recall.types import RecallRequest

ANSWERABLE = {"1", "2", "3", "4"}


@dataclass(frozen=True)
class Split:
    """Questions of one conversation by what the ablated copy holds for them."""

    absent: tuple[BenchQuestion, ...]
    present: tuple[BenchQuestion, ...]
    removed_turns: frozenset[str]


def split_evidence(conv: BenchConversation) -> Split:
    """Remove the evidence of every other answerable question (deterministic)."""
    answerable = [
        q for q in conv.questions if q.category in ANSWERABLE and q.gold_turns
    ]
    chosen = answerable[::2]
    removed = frozenset(t for q in chosen for t in q.gold_turns)
    present = tuple(q for q in answerable[1::2] if not q.gold_turns & removed)
    return Split(tuple(chosen), present, removed)


def without_turns(
    conv: BenchConversation, removed: frozenset[str]
) -> BenchConversation:
    """A copy of ``conv`` without the ``removed`` turns (and without its questions)."""
    sessions = tuple(
        BenchSession(
            s.session_id,
            s.started_at,
            tuple(t for t in s.turns if t.turn_id not in removed),
        )
        for s in conv.sessions
    )
    return replace(
        conv,
        conversation_id=f"{conv.conversation_id}-ablated",
        sessions=sessions,
        questions=(),
    )


def _no_match(ingested: runner.Ingested, q: BenchQuestion, threshold: float) -> bool:
    request = RecallRequest(
        query=q.text,
        limit=10,
        budget_tokens=4096,
        reference_time=q.question_date,
        record_event=False,
        explain=False,
        min_relevance=threshold,
    )
    return recall_run(ingested.principal, request).no_match


def _rate(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def measure(
    conversations: Sequence[BenchConversation],
    thresholds: Sequence[float],
    *,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Ingest, embed, recall; per-threshold no_match numbers (the orgs are dropped)."""
    run_id = runner.new_run_id()
    stores: list[tuple[runner.Ingested, runner.Ingested, Split]] = []
    orgs = []
    try:
        for conv in conversations:
            split = split_evidence(conv)
            full = runner.ingest(conv, run_id=run_id, key_turns_only=False, log=log)
            ablated = runner.ingest(
                without_turns(conv, split.removed_turns),
                run_id=run_id,
                key_turns_only=False,
                log=log,
            )
            orgs += [full.org, ablated.org]
            stores.append((full, ablated, split))
        rows, seconds = runner.embed_all(orgs, log=log)
        log(f"embedded {rows} rows in {seconds:.1f}s")
        results: dict[str, Any] = {}
        for threshold in thresholds:
            started = time.perf_counter()
            cat5: list[bool] = []
            full_answerable: list[bool] = []
            absent: list[bool] = []
            present: list[bool] = []
            for full, ablated, split in stores:
                for q in full.conversation.questions:
                    if q.category == "5":
                        cat5.append(_no_match(full, q, threshold))
                    elif q.category in ANSWERABLE and q.gold_turns:
                        full_answerable.append(_no_match(full, q, threshold))
                absent += [_no_match(ablated, q, threshold) for q in split.absent]
                present += [_no_match(ablated, q, threshold) for q in split.present]
            said = sum(absent) + sum(present)
            results[str(threshold)] = {
                "cat5_no_match_rate": _rate(cat5),
                "cat5_n": len(cat5),
                "cats1_4_false_no_match_rate": _rate(full_answerable),
                "cats1_4_n": len(full_answerable),
                "ablated_absent_n": len(absent),
                "ablated_present_n": len(present),
                "no_match_precision": round(sum(absent) / said, 3) if said else None,
                "no_match_recall": _rate(absent),
                "present_false_no_match_rate": _rate(present),
                "seconds": round(time.perf_counter() - started, 1),
            }
            log(f"min_relevance {threshold}: {results[str(threshold)]}")
        return results
    finally:
        runner.drop_orgs(orgs)


def render_markdown(results: dict[str, Any]) -> str:
    """One row per threshold."""
    lines = [
        "| min_relevance | cat 5 no_match | cats 1-4 false no_match "
        "| no_match precision "
        "(ablated) | no_match recall (absent) | false no_match (present) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for t, r in results.items():
        lines.append(
            f"| {t} | {r['cat5_no_match_rate']} (n={r['cat5_n']}) "
            f"| {r['cats1_4_false_no_match_rate']} (n={r['cats1_4_n']}) "
            f"| {r['no_match_precision']} | {r['no_match_recall']} "
            f"(n={r['ablated_absent_n']}) | {r['present_false_no_match_rate']} "
            f"(n={r['ablated_present_n']}) |"
        )
    return "\n".join(lines) + "\n"
