"""One recall costs a bounded number of queries, and the graph channel degrades
instead of slowing the whole recall down."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import services
from memory.services import MemoryInput
from recall import cascade
from recall.services import recall_run
from recall.types import RecallRequest

pytestmark = pytest.mark.django_db

# Measured on this fixture: 20 (cascade) and 18 (direct) queries in session 4; 9 and 9
# in session 5 (one store probe also sets the vector search parameters and looks up
# entities, rows are read once, no savepoint): every channel, explain, citations,
# conflicts and the recall event. The bounds leave a little room for new features; a
# per-row query (N+1) breaks them, and the test below catches one even within them.
MAX_QUERIES_CASCADE = 14
MAX_QUERIES_DIRECT = 14


@pytest.fixture
def conversation(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="trip", visibility="org"
    )
    lines = [
        ("Caroline", "Caroline went to the pottery workshop in Boston with Melanie"),
        ("Melanie", "It was lovely, Caroline made a blue bowl for her mother"),
        ("Caroline", "Next month Caroline wants to paint a sunrise over the lake"),
        ("Melanie", "Melanie is training for the Boston marathon in April"),
    ] * 5
    result = services.memory_remember(
        principal=alice,
        session=session,
        enqueue=False,
        items=[
            MemoryInput(
                content=f"{text} ({i})",
                speaker=who,
                occurred_at=timezone.now() - timedelta(days=30 - i),
            )
            for i, (who, text) in enumerate(lines)
        ],
    )
    services.memory_embed(ids=[m.pk for m in result.memories])
    return alice


def _count(principal, **kwargs) -> tuple[int, object]:
    recall_run(principal, RecallRequest(query="warm up the model", record_event=False))
    with CaptureQueriesContext(connection) as ctx:
        pack = recall_run(principal, RecallRequest(**kwargs))
    return len(ctx.captured_queries), pack


def test_a_cascade_recall_issues_a_bounded_number_of_queries(
    conversation, django_assert_max_num_queries
):
    query = "What did Caroline make at the pottery workshop?"
    recall_run(conversation, RecallRequest(query="warm up", record_event=False))
    with django_assert_max_num_queries(MAX_QUERIES_CASCADE):
        pack = recall_run(conversation, RecallRequest(query=query))
    assert pack.phase_reached >= 2
    assert pack.items


def test_the_query_count_does_not_grow_with_the_number_of_results(conversation):
    few, _ = _count(
        conversation, query="What did Caroline make at the pottery workshop?", limit=3
    )
    many, pack = _count(
        conversation, query="What did Caroline make at the pottery workshop?", limit=20
    )
    assert len(pack.items) > 3
    assert many <= few + 2  # hydration is one query per tier, not one per row


def test_a_direct_recall_issues_a_bounded_number_of_queries(
    conversation, django_assert_max_num_queries
):
    recall_run(conversation, RecallRequest(query="warm up", record_event=False))
    with django_assert_max_num_queries(MAX_QUERIES_DIRECT):
        pack = recall_run(
            conversation, RecallRequest(query="Caroline pottery", mode="direct")
        )
    assert pack.items


def test_the_graph_channel_over_its_budget_degrades_and_recall_still_answers(
    conversation, monkeypatch
):
    # The graph channel is off by default (weight 0); a request can switch it on.
    monkeypatch.setattr(
        cascade, "GRAPH_TIME_BUDGET_MS", -1.0
    )  # every graph call is late
    pack = recall_run(
        conversation,
        RecallRequest(
            query="What did Caroline make at the pottery workshop?",
            mode="direct",
            weights={"graph": 0.3},
        ),
    )
    kinds = [d["code"] for d in pack.degradations]
    assert "graph_budget" in kinds
    assert pack.items


def test_the_graph_channel_fanout_cap_degrades(conversation, monkeypatch):
    monkeypatch.setattr(cascade, "GRAPH_MAX_EDGES", 2)
    pack = recall_run(
        conversation,
        RecallRequest(
            query="Caroline and Melanie in Boston",
            mode="direct",
            weights={"graph": 0.3},
        ),
    )
    assert any(d["code"] == "graph_budget" for d in pack.degradations)
    assert pack.items


def test_the_bulk_build_memory_grows_with_the_corpus():
    from bench.loader import build_memory

    assert build_memory(1_000) == build_memory(100_000) == "1GB"
    assert build_memory(1_000_000) == "3GB"  # a 1M graph (~2 GB) stays in memory
