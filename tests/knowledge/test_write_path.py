"""The background chain: write, embed, consolidate; API facts conflict too."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.models import Conflict, ConsolidationRun, Memory, Relationship

MAY = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


def test_posting_messages_consolidates_them_after_commit(
    as_persona, world, django_capture_on_commit_callbacks
):
    client = as_persona("agent_a")
    sid = client.post(
        "/api/v1/sessions", {"external_id": "run-1"}, format="json"
    ).json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(
            f"/api/v1/sessions/{sid}/messages",
            {
                "messages": [
                    {
                        "content": "I moved to Denver last month for a new job.",
                        "speaker": "Caroline",
                        "occurred_at": "2023-05-08T10:00:00Z",
                    }
                ]
            },
            format="json",
        )
    assert r.status_code == 201, r.content
    run = ConsolidationRun.objects.get(session_id=sid)
    assert run.status == "ok" and run.stats["observations"] == 1
    obs = Memory.objects.get(kind="observation")
    assert obs.content == (
        "Caroline moved to Denver last month (April 2023) for a new job."
    )
    assert obs.embedding_state == "ready"
    assert obs.visibility == "team" and obs.team_id == world.team_a.pk
    fact = Memory.objects.get(kind="fact")
    assert fact.content == "Caroline lives in Denver (since April 2023)"
    assert fact.owner_agent_id == world.agent_a.pk


def test_facts_written_through_the_api_are_checked_for_conflicts(
    as_persona, world, django_capture_on_commit_callbacks
):
    client = as_persona("alice")
    for text in ("Caroline lives in Boston", "Caroline lives in Denver"):
        with django_capture_on_commit_callbacks(execute=True):
            r = client.post(
                "/api/v1/memories",
                {"memories": [{"tier": "semantic", "kind": "fact", "content": text}]},
                format="json",
            )
        assert r.status_code == 201, r.content
    conflict = Conflict.objects.get()
    assert conflict.status == "open"
    assert Relationship.objects.filter(predicate="lives_in").count() == 2
    r = client.get("/api/v1/conflicts")
    assert [len(c["alternatives"]) for c in r.json()["results"]] == [2]


def test_a_private_message_yields_private_derived_rows_for_the_same_owner(
    writer, world
):
    session = writer.session("alice", "private-notes")
    writer.say(
        "alice",
        session,
        ("Alice", "I work at Initech and I live in Lisbon since 2021.", MAY),
        visibility="private",
    )
    writer.consolidate(session)
    derived = Memory.objects.exclude(tier="raw")
    assert derived.count() >= 3
    for row in derived:
        assert (row.visibility, row.owner_user_id) == ("private", world.alice.pk), row
    for rel in Relationship.objects.all():
        assert (rel.visibility, rel.owner_user_id) == ("private", world.alice.pk)
    bob = world.principal("bob")
    assert not Memory.objects.visible_to(bob).exists()
    assert (
        Memory.objects.visible_to(world.principal("alice"))
        .filter(kind="fact", content__startswith="Alice works at Initech")
        .exists()
    )


def test_team_messages_do_not_leak_into_another_team(writer, world):
    session = writer.session(
        "bob", "team-b", visibility="team", team_id=world.team_b.pk
    )
    writer.say("bob", session, ("Bob", "I live in Oslo and I love skiing.", MAY))
    writer.consolidate(session)
    alice = world.principal("alice")
    assert not Memory.objects.visible_to(alice).exists()
    assert (
        Memory.objects.visible_to(world.principal("bob")).filter(kind="fact").count()
        == 2
    )


def test_with_a_broker_a_burst_is_consolidated_once_per_window(
    world, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """Embedding batches of one session ask for consolidation; with a broker the
    first asks for a run ``MNEMO_CONSOLIDATION_DELAY_S`` later, the rest of the
    window rides on it. Eager mode (no broker) consolidates after every batch."""
    from django.core.cache import cache

    from memory import services, tasks
    from memory.services import MemoryInput

    principal = world.principal("agent_a")
    session = services.session_create(principal=principal, external_id="burst")
    ids = [
        m.pk
        for m in services.memory_remember(
            principal=principal,
            items=[MemoryInput(content=f"message {i}") for i in range(3)],
            session=session,
            enqueue=False,
        ).memories
    ]
    sent = []
    monkeypatch.setattr(
        tasks.consolidate_session,
        "apply_async",
        lambda args, countdown: sent.append((args, countdown)),
    )
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.MNEMO_CONSOLIDATION_DELAY_S = 5
    cache.clear()
    for mid in ids:  # three embedding batches of the same session
        with django_capture_on_commit_callbacks(execute=True):
            tasks.enqueue_consolidation([mid])
    assert sent == [((session.pk,), 5)]
    cache.clear()  # the window is over: the next batch asks again
    with django_capture_on_commit_callbacks(execute=True):
        tasks.enqueue_consolidation([ids[0]])
    assert len(sent) == 2
