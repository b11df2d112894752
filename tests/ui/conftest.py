"""Console fixtures: a small acme world with sessions, facts, entities, a conflict and
feedback, plus a globex row that must never show up for acme people.

Rows are written through ``memory.services`` with ``enqueue=False`` so embeddings stay
``pending`` (the timeline's polling state) unless a test embeds them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from accounts.principals import Principal
from memory import entities
from memory.models import (
    Conflict,
    ConflictAlternative,
    ConflictEvent,
    Entity,
    Memory,
    Relationship,
    Session,
)
from memory.services import MemoryInput, memory_remember, session_create
from recall.models import Feedback, RecallEvent
from tests.conftest import World

# Playwright's sync API runs an event loop in the test thread; live_server's ORM use
# from the same thread is safe here (one test at a time).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
JS_LINK = "[click me](javascript:window.__pwned=3)"


@pytest.fixture(scope="session")
def browser_type_launch_args(
    browser_type_launch_args: dict[str, Any],
) -> dict[str, Any]:
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@dataclass
class Console:
    world: World
    session: Session
    messages: list[Memory]
    fact_boston: Memory
    fact_denver: Memory
    private_bob: Memory
    team_b: Memory
    globex_row: Memory
    xss: Memory
    caroline: Entity
    conflict: Conflict
    event_alice: RecallEvent
    feedback_wrong: Feedback
    feedback_vera: Feedback


def _remember(
    principal: Principal, session: Session | None = None, **kw: Any
) -> Memory:
    return memory_remember(
        principal=principal, items=[MemoryInput(**kw)], session=session, enqueue=False
    ).memories[0]


@pytest.fixture
def console(world: World) -> Console:
    alice = world.principal("alice")
    session = session_create(
        principal=alice, external_id="run-1", participants=["Caroline", "Mel"]
    )
    texts = [
        ("Caroline", "I moved to Boston in May, the harbour is lovely."),
        ("Mel", "Did you keep your flat in Denver?"),
        ("Caroline", XSS),
        ("Mel", JS_LINK),
    ]
    messages = memory_remember(
        principal=alice,
        session=session,
        enqueue=False,
        items=[MemoryInput(content=t, speaker=s, role="user") for s, t in texts],
    ).memories
    fact_boston = _remember(
        alice,
        tier="semantic",
        kind="fact",
        content="Caroline lives in Boston.",
        derived_from=(messages[0].pk,),
    )
    fact_denver = _remember(
        alice, tier="semantic", kind="fact", content="Caroline lives in Denver."
    )
    xss = messages[2]
    private_bob = _remember(
        world.principal("bob"),
        content="Bob's private salary note",
        visibility="private",
    )
    team_b = _remember(
        world.principal("bob"), content="Team B roadmap: ship Zephyr", visibility="team"
    )
    globex_row = _remember(world.principal("carol"), content="Globex merger codename")
    entities.extract_and_link(ids=[m.pk for m in Memory.objects.all()])
    caroline = Entity.objects.get(org=world.acme, normalized_name="caroline")
    boston = Entity.objects.get(org=world.acme, normalized_name="boston")
    denver = Entity.objects.get(org=world.acme, normalized_name="denver")
    rels = {
        m.pk: Relationship.objects.create(
            org=world.acme,
            subject=caroline,
            predicate="lives_in",
            object_entity=place,
            statement=m,
        )
        for m, place in ((fact_boston, boston), (fact_denver, denver))
    }
    conflict = Conflict.objects.create(
        org=world.acme,
        kind="fact_conflict",
        subject=caroline,
        predicate="lives_in",
        summary="Where does Caroline live?",
    )
    for m in (fact_boston, fact_denver):
        ConflictAlternative.objects.create(
            conflict=conflict,
            memory=m,
            relationship=rels[m.pk],
            supporters=[f"memory:{m.pk}"],
        )
    ConflictEvent.objects.create(conflict=conflict, action="opened", actor="system")
    event_alice = RecallEvent.objects.create(
        org=world.acme,
        principal=alice.label,
        query="Where does Caroline live?",
        item_ids=[fact_denver.pk, fact_boston.pk],
        phase_reached=1,
    )
    feedback_wrong = Feedback.objects.create(
        org=world.acme,
        event=event_alice,
        memory=fact_denver,
        verdict="wrong",
        comment="She moved to Boston",
        author=alice.label,
    )
    vera = world.principal("vera")
    event_vera = RecallEvent.objects.create(
        org=world.acme,
        principal=vera.label,
        query="Caroline?",
        item_ids=[fact_boston.pk],
    )
    feedback_vera = Feedback.objects.create(
        org=world.acme,
        event=event_vera,
        memory=fact_boston,
        verdict="helpful",
        author=vera.label,
    )
    return Console(
        world,
        session,
        messages,
        fact_boston,
        fact_denver,
        private_bob,
        team_b,
        globex_row,
        xss,
        caroline,
        conflict,
        event_alice,
        feedback_wrong,
        feedback_vera,
    )


@pytest.fixture
def login(world: World):  # type: ignore[no-untyped-def]
    """``login("alice")`` -> a Django test client with that persona's session."""

    def make(name: str) -> Client:
        client = Client()
        client.force_login(getattr(world, name))
        return client

    return make
