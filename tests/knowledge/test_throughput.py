"""Consolidating all of LoCoMo dev (rule-based): what it yields; its rate is printed.

The rate is a figure for docs/benchmarks.md, not an assertion: timings belong to
benchmarks (BENCHMARKS.md), and this machine is shared.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings

from memory import services
from memory.consolidation.service import consolidate_session
from memory.models import Memory
from memory.services import MemoryInput

LOCOMO = Path(settings.MNEMO_DATASETS_DIR) / "locomo" / "locomo_dev.json"


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo dev set not present")
def test_locomo_dev_consolidates_every_session(world, settings, capsys):
    from recall.evaluation.datasets import load_locomo

    settings.MNEMO_MAX_BATCH = 5000
    alice = world.principal("alice")
    sessions = []
    for conv in load_locomo(LOCOMO):
        session = services.session_create(
            principal=alice, external_id=conv.conversation_id
        )
        items = [
            MemoryInput(
                content=turn.text,
                speaker=turn.speaker,
                occurred_at=s.started_at + timedelta(seconds=30 * i),
                external_ref=turn.turn_id,
            )
            for s in conv.sessions
            for i, turn in enumerate(s.turns)
        ]
        services.memory_remember(
            principal=alice, items=items, session=session, enqueue=False
        )
        sessions.append(session)
    messages = Memory.objects.filter(kind="message").count()
    started = time.perf_counter()
    runs = [consolidate_session(s.pk) for s in sessions]
    seconds = time.perf_counter() - started
    stats = {
        k: sum(r.stats[k] for r in runs if r)
        for k in (
            "observations",
            "facts",
            "procedures",
            "episodes",
            "topics",
            "conflicts",
        )
    }
    with capsys.disabled():
        print(
            f"\nLoCoMo dev: {messages} messages consolidated in {seconds:.1f}s "
            f"({messages / seconds:.0f} msg/s): {stats}"
        )
    assert stats["observations"] > messages // 3
    assert stats["episodes"] >= 100
