"""Run a benchmark through Mnemo's own write path and ``recall_run``.

Each conversation (LoCoMo) or question haystack (LongMemEval) is ingested into a fresh
organization through ``memory.services`` (one session per benchmark session, one raw
message per turn, the turn id in ``external_ref``, the session date as ``occurred_at``),
embedded with the same service the worker uses, then every question is recalled and the
packed items' citations are mapped back to turn ids.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction

from accounts.models import Agent, Organization
from accounts.principals import Principal
from memory import services
from memory.models import EmbeddingState, Memory
from recall.evaluation.datasets import BenchConversation, BenchQuestion
from recall.evaluation.metrics import QuestionResult
from recall.services import recall_run
from recall.types import RecallRequest

ABLATIONS: dict[str, dict[str, object]] = {
    "full": {},
    "lexical_only": {"weights": {"vector": 0.0, "temporal": 0.0, "graph": 0.0}},
    "vector_only": {"weights": {"lexical": 0.0, "graph": 0.0, "temporal": 0.0}},
    "no_graph": {"weights": {"graph": 0.0}},
    "graph_on": {"weights": {"graph": 0.3}},
    "no_temporal": {"weights": {"temporal": 0.0}},
    "no_neighbors": {"neighbor_share": 0.0},
    "no_speaker": {"speaker_boost": 1.0},
    "no_corroboration": {"corroboration_share": 0.0},
    # Raw turns only: what a store without the consolidated tiers would return.
    "raw_only": {"tiers": ("raw",), "kinds": ("message",)},
    "direct": {"mode": "direct"},
    "no_gate": {"min_relevance": 0.0},
    "budget_low": {"budget_level": "low"},
    "budget_high": {"budget_level": "high"},
    "budget_high_no_graph": {"budget_level": "high", "weights": {"graph": 0.0}},
}


@dataclass
class Ingested:
    conversation: BenchConversation
    org: Organization
    principal: Principal
    turns: int


def ingest(
    conv: BenchConversation,
    *,
    run_id: str,
    key_turns_only: bool,
    log: Callable[[str], None],
) -> Ingested:
    """Write one conversation into a fresh org through the write services."""
    org = Organization.objects.create(
        name=f"eval {conv.conversation_id}",
        slug=f"eval-{run_id}-{conv.conversation_id}"[:80],
    )
    agent = Agent.objects.create(org=org, name="evaluator", default_visibility="org")
    principal = Principal.for_agent(agent)
    count = 0
    for bench_session in conv.sessions:
        session = services.session_create(
            principal=principal,
            external_id=bench_session.session_id,
            started_at=bench_session.started_at,
            visibility="org",
        )
        items = [
            services.MemoryInput(
                content=piece,
                speaker=t.speaker,
                role=t.role or "user",
                occurred_at=bench_session.started_at + timedelta(seconds=t.index),
                external_ref=t.turn_id,
            )
            for t in bench_session.turns
            if t.text.strip() and (t.is_key or not key_turns_only)
            for piece in split_text(t.text, settings.MNEMO_MAX_CONTENT_BYTES)
        ]
        for start in range(0, len(items), 500):
            with transaction.atomic():
                services.memory_remember(
                    principal=principal,
                    items=items[start : start + 500],
                    session=session,
                    field_prefix="messages",
                    enqueue=False,
                )
        count += len(items)
    return Ingested(conv, org, principal, count)


def split_text(text: str, max_bytes: int) -> list[str]:
    """Split an over-long turn into pieces under the write limit (same turn id each).

    The write API rejects content over ``MNEMO_MAX_CONTENT_BYTES``; an agent would
    split such a message, and so does the evaluator (at line, then word boundaries).
    """
    if len(text.encode()) <= max_bytes:
        return [text]
    pieces: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if len(candidate.encode()) > max_bytes and current:
            pieces.append(current)
            current = word
        else:
            current = candidate
    if current:
        pieces.append(current)
    return [p.encode()[:max_bytes].decode(errors="ignore") for p in pieces]


def embed_all(
    orgs: Sequence[Organization], *, batch: int = 256, log: Callable[[str], None]
) -> tuple[int, float]:
    """Embed every pending row of ``orgs`` with the worker's service.

    Returns (rows, seconds).
    """
    started = time.perf_counter()
    ids = list(
        Memory.objects.filter(org__in=orgs, embedding_state=EmbeddingState.PENDING)
        .order_by("id")
        .values_list("id", flat=True)
    )
    for start in range(0, len(ids), batch):
        services.memory_embed(ids=ids[start : start + batch])
        if start and start % (batch * 20) == 0:
            log(f"  embedded {start}/{len(ids)}")
    return len(ids), time.perf_counter() - started


def run_questions(
    ingested: Ingested,
    questions: Sequence[BenchQuestion],
    *,
    ablation: str,
    k: int,
) -> list[QuestionResult]:
    """Recall every question and map packed items (and citations) to turn ids."""
    options = ABLATIONS[ablation]
    results = []
    for q in questions:
        request = RecallRequest(
            query=q.text,
            limit=k,
            budget_tokens=32768,
            reference_time=q.question_date,
            record_event=False,
            explain=False,
        )
        request = replace(request, **options)  # type: ignore[arg-type]
        started = time.perf_counter()
        pack = recall_run(ingested.principal, request)
        latency = (time.perf_counter() - started) * 1000
        ranked: list[str] = []
        for item in pack.items:
            refs = [c["external_ref"] for c in item.citations] or [item.external_ref]
            for ref in refs:
                if ref and ref not in ranked:
                    ranked.append(ref)
        key = ingested.conversation.key_turn_ids
        if key:
            ranked = [r for r in ranked if r in key]
        results.append(
            QuestionResult(
                question_id=q.question_id,
                category=q.category,
                ranked_turns=tuple(ranked),
                gold_turns=q.gold_turns,
                gold_sessions=q.gold_sessions,
                latency_ms=latency,
            )
        )
    return results


def drop_orgs(orgs: Sequence[Organization]) -> None:
    """Remove evaluation orgs and everything in them (bulk SQL: they can be large)."""
    ids = [o.pk for o in orgs]
    if not ids:
        return
    with transaction.atomic(), connection.cursor() as c:
        c.execute("SET LOCAL statement_timeout = 0")  # bulk cleanup, not a request
        c.execute(
            "DELETE FROM memory_memory_derived_from WHERE from_memory_id IN "
            "(SELECT id FROM memory_memory WHERE org_id = ANY(%s))",
            [ids],
        )
        for table in (
            "memory_mention",
            "memory_conflictevent",
            "recall_feedback",
            "recall_recallevent",
            "memory_idempotencyrecord",
        ):
            column = (
                "conflict_id IN (SELECT id FROM memory_conflict WHERE org_id = ANY(%s))"
                if table == "memory_conflictevent"
                else "org_id = ANY(%s)"
            )
            c.execute(f"DELETE FROM {table} WHERE {column}", [ids])
        c.execute(
            "DELETE FROM memory_conflictalternative WHERE conflict_id IN "
            "(SELECT id FROM memory_conflict WHERE org_id = ANY(%s))",
            [ids],
        )
        c.execute(
            "DELETE FROM memory_relationship_evidence WHERE relationship_id IN "
            "(SELECT id FROM memory_relationship WHERE org_id = ANY(%s))",
            [ids],
        )
        for table in ("memory_conflict", "memory_relationship"):
            c.execute(f"DELETE FROM {table} WHERE org_id = ANY(%s)", [ids])
        # Only rows that point somewhere: rewriting every row of a consolidated
        # benchmark (tens of thousands, each a new version in every index, HNSW
        # included) outlasted the statement timeout.
        c.execute(
            "UPDATE memory_memory SET superseded_by_id = NULL "
            "WHERE org_id = ANY(%s) AND superseded_by_id IS NOT NULL",
            [ids],
        )
        c.execute("DELETE FROM memory_memory WHERE org_id = ANY(%s)", [ids])
    Organization.objects.filter(pk__in=ids).delete()


def consolidate_all(
    orgs: Sequence[Organization], *, log: Callable[[str], None]
) -> float:
    """Run the knowledge-tier consolidation over every session (seconds taken)."""
    from memory.consolidation.service import consolidate_session
    from memory.models import Session

    started = time.perf_counter()
    for session_id in (
        Session.objects.filter(org__in=orgs).order_by("id").values_list("id", flat=True)
    ):
        consolidate_session(session_id, full=True)
    return time.perf_counter() - started


def new_run_id() -> str:
    return secrets.token_hex(3)
