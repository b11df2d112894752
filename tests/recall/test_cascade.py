"""The cascade's phases: what each one runs."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import embeddings, services
from memory.services import MemoryInput
from recall.cascade import CascadeState, QueryContext, run_phase
from recall.pipeline.intent import profile_intent
from recall.scope import Scope
from recall.types import DEFAULT_WEIGHTS, RecallRequest

pytestmark = pytest.mark.django_db

QUERY = "What is the zeppelin budget?"


def _phase1(principal, vector):
    """Phase 1 for QUERY, searching with ``vector``: (its ranking, lexical SQL run)."""
    request = RecallRequest(query=QUERY)
    ctx = QueryContext(
        request,
        profile_intent(QUERY, reference_time=timezone.now()),
        np.asarray([vector], dtype=np.float32),
        {},
        timezone.now(),
    )
    state = CascadeState(weights=dict(DEFAULT_WEIGHTS))
    scope = Scope(principal=principal, tiers=("semantic", "procedural", "topic"))
    with CaptureQueriesContext(connection) as q:
        ranked = run_phase(1, scope, ctx, state)
    return ranked, state, sum("to_tsquery" in s["sql"] for s in q)


def test_phase_one_skips_full_text_when_no_fact_is_close_in_meaning(world):
    """Phase 1 keeps only rows its vector channel found: without one, the lexical
    channel's rows would all be dropped, so it does not run; with one, it runs and
    ranks as before. Another org's principal finds nothing either way."""
    alice, carol = world.principal("alice"), world.principal("carol")
    fact = services.memory_remember(
        principal=alice,
        items=[
            MemoryInput(
                content="The zeppelin budget is 40 million euros",
                tier="semantic",
                kind="fact",
            )
        ],
        enqueue=False,
    ).memories[0]
    services.memory_embed(ids=[fact.pk])
    close = embeddings.embed_queries([QUERY])[0]
    ranked, state, lexical = _phase1(alice, close)
    assert [i.memory_id for i in ranked] == [fact.pk]
    assert set(state.hits[fact.pk]) == {"vector", "lexical"} and lexical >= 1
    # The opposite direction: cosine -1, under phase 1's floor, no vector hit.
    ranked, state, lexical = _phase1(alice, -close)
    assert ranked == [] and state.hits == {} and lexical == 0
    assert "p1.lexical" not in state.timings
    ranked, state, _ = _phase1(carol, close)
    assert ranked == [] and state.hits == {}
