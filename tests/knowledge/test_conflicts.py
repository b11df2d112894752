"""Conflicts: detection, automatic supersession, resolution and history."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from memory.models import Conflict, ConflictStatus, Entity, Memory, Relationship, Status

JAN = datetime(2023, 1, 10, 10, 0, tzinfo=UTC)
MAY = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


def _current_homes(principal, *, at=None):
    qs = Memory.objects.visible_to(principal).filter(
        kind="fact", content__contains="lives in"
    )
    qs = qs.active() if at is None else qs.known_at(at)
    return sorted(qs.current_as_of(timezone.now()).values_list("content", flat=True))


def test_a_stated_move_closes_the_old_home_instead_of_two_current_truths(writer, world):
    s1 = writer.session("alice", "jan")
    writer.say("alice", s1, ("Caroline", "I live in Boston.", JAN))
    writer.consolidate(s1)
    s2 = writer.session("alice", "may")
    writer.say("alice", s2, ("Caroline", "I moved to Denver in March.", MAY))
    writer.consolidate(s2)
    alice = world.principal("alice")
    assert _current_homes(alice) == ["Caroline lives in Denver (since March 2023)"]
    boston = Memory.objects.get(
        kind="fact",
        status=Status.ACTIVE,
        content__startswith="Caroline lives in Boston",
    )
    assert boston.valid_to == datetime(2023, 3, 1, tzinfo=UTC)
    assert "(until 2023-03-01)" in boston.content
    old = Memory.objects.get(kind="fact", status=Status.SUPERSEDED)
    assert (
        old.superseded_by_id == boston.pk and old.content == "Caroline lives in Boston"
    )
    conflict = Conflict.objects.get()
    assert conflict.status == ConflictStatus.RESOLVED and conflict.resolution["auto"]
    assert [e.action for e in conflict.events.all()] == ["opened", "auto_resolved"]
    assert Entity.objects.get(normalized_name="caroline").unstable


def test_two_unexplained_homes_open_a_fact_conflict_with_supporters(writer, world):
    s1 = writer.session("alice", "a")
    writer.say("alice", s1, ("Caroline", "I live in Boston.", JAN))
    writer.consolidate(s1)
    s2 = writer.session("alice", "b")
    writer.say("alice", s2, ("Melanie", "Caroline lives in Denver, I think.", MAY))
    writer.consolidate(s2)
    conflict = Conflict.objects.get()
    assert conflict.kind == "fact_conflict" and conflict.status == ConflictStatus.OPEN
    alts = list(conflict.alternatives.order_by("id"))
    assert [a.memory.content for a in alts] == [
        "Caroline lives in Boston",
        "Caroline lives in Denver",
    ]
    assert alts[0].quote == "I live in Boston."
    assert any(s["quote"] == "I live in Boston." for s in alts[0].supporters)
    assert conflict.subject.unstable


def test_asserted_and_denied_statement_is_an_evidence_conflict_with_quotes(
    writer, world
):
    s = writer.session("alice", "e")
    writer.say(
        "alice",
        s,
        ("Caroline", "I love hiking in the mountains.", JAN),
        ("Melanie", "Caroline doesn't like hiking at all.", MAY),
    )
    writer.consolidate(s)
    conflict = Conflict.objects.get()
    assert conflict.kind == "evidence_conflict"
    assert sorted(a.quote for a in conflict.alternatives.all()) == [
        "Caroline doesn't like hiking at all.",
        "I love hiking in the mountains.",
    ]


def _open_home_conflict(writer, persona="alice", visibility=None, second="alice"):
    s1 = writer.session(persona, "h1")
    writer.say(
        persona, s1, ("Caroline", "I live in Boston.", JAN), visibility=visibility
    )
    writer.consolidate(s1)
    s2 = writer.session(second, "h2")
    writer.say(second, s2, ("Melanie", "Caroline lives in Denver now.", MAY))
    writer.consolidate(s2)
    return Conflict.objects.get(status=ConflictStatus.OPEN)


def test_choosing_one_supersedes_the_other_now_while_known_at_keeps_the_past(
    writer, world, as_persona
):
    conflict = _open_home_conflict(writer)
    denver = conflict.alternatives.get(memory__content__contains="Denver").memory_id
    before = timezone.now()
    alice = world.principal("alice")
    assert len(_current_homes(alice)) == 2
    r = as_persona("alice").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve",
        {"action": "choose", "chosen": denver, "note": "she told me herself"},
        format="json",
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["status"] == "resolved" and body["chosen_id"] == denver
    assert [e["action"] for e in body["events"]] == ["opened", "choose"]
    assert body["events"][1]["note"] == "she told me herself"
    assert _current_homes(alice) == ["Caroline lives in Denver"]
    assert _current_homes(alice, at=before) == [
        "Caroline lives in Boston",
        "Caroline lives in Denver",
    ]
    boston = Memory.objects.get(content="Caroline lives in Boston")
    assert boston.status == Status.SUPERSEDED and boston.superseded_by_id == denver
    assert Relationship.objects.get(statement=boston).status == Status.SUPERSEDED
    again = as_persona("alice").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve", {"action": "dismiss"}, format="json"
    )
    assert again.status_code == 409


def test_both_valid_with_bounds_writes_bounded_copies(writer, world, as_persona):
    conflict = _open_home_conflict(writer)
    boston = conflict.alternatives.get(memory__content__contains="Boston").memory_id
    r = as_persona("olivia").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve",
        {
            "action": "both_valid",
            "bounds": [{"memory_id": boston, "valid_to": "2023-03-01T00:00:00Z"}],
        },
        format="json",
    )
    assert r.status_code == 200, r.content
    assert _current_homes(world.principal("alice")) == ["Caroline lives in Denver"]
    bounded = Memory.objects.get(
        kind="fact",
        status=Status.ACTIVE,
        content__startswith="Caroline lives in Boston",
    )
    assert bounded.valid_to == datetime(2023, 3, 1, tzinfo=UTC)
    assert Memory.objects.get(pk=boston).superseded_by_id == bounded.pk


def test_dismiss_keeps_both_and_records_the_note(writer, world, as_persona):
    conflict = _open_home_conflict(writer)
    r = as_persona("alice").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve",
        {"action": "dismiss", "note": "two Carolines"},
        format="json",
    )
    assert r.status_code == 200
    assert r.json()["status"] == "dismissed"
    assert len(_current_homes(world.principal("alice"))) == 2


def test_viewer_is_refused_403_and_other_org_gets_404_like_a_missing_id(
    writer, world, as_persona
):
    conflict = _open_home_conflict(writer)
    url = f"/api/v1/conflicts/{conflict.pk}/resolve"
    body = {"action": "dismiss"}
    assert as_persona("vera").get(f"/api/v1/conflicts/{conflict.pk}").status_code == 200
    assert as_persona("vera").post(url, body, format="json").status_code == 403
    for persona in ("carol", "agent_globex"):
        client = as_persona(persona)
        assert client.post(url, body, format="json").status_code == 404
        assert client.get(f"/api/v1/conflicts/{conflict.pk}").status_code == 404
        assert client.get("/api/v1/conflicts").json()["results"] == []
    missing = as_persona("alice").post(
        "/api/v1/conflicts/999999/resolve", body, format="json"
    )
    assert missing.status_code == 404
    assert as_persona("anonymous").get("/api/v1/conflicts").status_code in (401, 403)
    Conflict.objects.filter(pk=conflict.pk).update(status=ConflictStatus.OPEN)
    assert Conflict.objects.get(pk=conflict.pk).status == ConflictStatus.OPEN


def test_conflicts_only_show_alternatives_the_viewer_may_see(writer, world, as_persona):
    conflict = _open_home_conflict(writer, visibility="private")
    private = conflict.alternatives.get(memory__content__contains="Boston").memory
    assert private.visibility == "private" and private.owner_user_id == world.alice.pk
    listed = as_persona("bob").get("/api/v1/conflicts").json()["results"]
    (seen,) = listed
    assert [a["content"] for a in seen["alternatives"]] == ["Caroline lives in Denver"]
    mine = as_persona("alice").get(f"/api/v1/conflicts/{conflict.pk}").json()
    assert len(mine["alternatives"]) == 2
    r = as_persona("bob").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve",
        {"action": "choose", "chosen": seen["alternatives"][0]["memory_id"]},
        format="json",
    )
    assert r.status_code == 403
    assert Memory.objects.get(pk=private.pk).status == Status.ACTIVE
