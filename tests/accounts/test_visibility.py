"""The visibility matrix: each persona sees exactly what the rules allow (ORM, API)."""

from __future__ import annotations

import pytest

from accounts.principals import NoAccess, Principal
from memory import services
from memory.models import Memory
from memory.services import MemoryInput
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(world):
    """One row per visibility shape in acme, plus one in globex."""
    alice = world.principal("alice")
    bob = world.principal("bob")
    agent = world.principal("agent_a")
    made = {}
    made["org"] = services.memory_remember(
        principal=alice,
        items=[MemoryInput(content="org-wide note", visibility="org")],
        enqueue=False,
    ).memories[0]
    made["team_a"] = services.memory_remember(
        principal=alice,
        items=[MemoryInput(content="team A note", visibility="team")],
        enqueue=False,
    ).memories[0]
    made["team_b"] = services.memory_remember(
        principal=bob,
        items=[MemoryInput(content="team B note", visibility="team")],
        enqueue=False,
    ).memories[0]
    made["alice_private"] = services.memory_remember(
        principal=alice,
        items=[MemoryInput(content="alice diary", visibility="private")],
        enqueue=False,
    ).memories[0]
    made["agent_private"] = services.memory_remember(
        principal=agent,
        items=[MemoryInput(content="agent scratch", visibility="private")],
        enqueue=False,
    ).memories[0]
    made["globex"] = services.memory_remember(
        principal=world.principal("carol"),
        items=[MemoryInput(content="globex secret", visibility="org")],
        enqueue=False,
    ).memories[0]
    return made


EXPECTED = {
    "alice": {"org", "team_a", "alice_private"},
    "bob": {"org", "team_b"},
    "vera": {"org"},
    "olivia": {"org", "team_a", "team_b"},
    "carol": {"globex"},
    "agent_a": {"org", "team_a", "agent_private"},
    "agent_globex": {"globex"},
}


@pytest.mark.parametrize("persona", sorted(EXPECTED))
def test_each_persona_sees_exactly_what_the_rules_allow_through_the_orm(
    world, rows, persona
):
    principal = world.principal(persona)
    visible = set(Memory.objects.visible_to(principal).values_list("id", flat=True))
    assert visible == {rows[name].pk for name in EXPECTED[persona]}


@pytest.mark.parametrize("persona", sorted(EXPECTED))
def test_each_persona_sees_exactly_what_the_rules_allow_through_the_api(
    world, rows, persona
):
    client = client_for(world, persona)
    listed = {m["id"] for m in client.get("/api/v1/memories").json()["results"]}
    assert listed == {rows[name].pk for name in EXPECTED[persona]}
    for name, row in rows.items():
        r = client.get(f"/api/v1/memories/{row.pk}")
        assert r.status_code == (200 if name in EXPECTED[persona] else 404), (
            name,
            r.content,
        )


def test_another_orgs_id_answers_exactly_like_a_missing_id(world, rows):
    client = client_for(world, "carol")
    other = client.get(f"/api/v1/memories/{rows['org'].pk}")
    missing = client.get("/api/v1/memories/999999999")
    assert other.status_code == missing.status_code == 404
    assert other.json() == missing.json()


def test_a_user_without_membership_is_refused(world, rows):
    r = client_for(world, "nora").get("/api/v1/memories")
    assert r.status_code == 403
    assert "member" in r.json()["error"]


def test_anonymous_requests_are_refused(world, rows):
    assert client_for(world, "anonymous").get("/api/v1/memories").status_code in (
        401,
        403,
    )


def test_a_viewer_cannot_write(world):
    r = client_for(world, "vera").post(
        "/api/v1/memories",
        {"memories": [{"tier": "semantic", "kind": "fact", "content": "x"}]},
        format="json",
    )
    assert r.status_code == 403


def test_a_revoked_key_is_refused_at_once(world, rows):
    client = client_for(world, "agent_a")
    assert client.get("/api/v1/memories").status_code == 200
    world.agent_a.api_keys.get().revoke()
    r = client.get("/api/v1/memories")
    assert r.status_code == 401


def test_writing_into_a_team_you_are_not_in_is_refused(world):
    r = client_for(world, "alice").post(
        "/api/v1/memories",
        {
            "memories": [
                {
                    "tier": "semantic",
                    "kind": "fact",
                    "content": "x",
                    "visibility": "team",
                    "team_id": world.team_b.pk,
                }
            ]
        },
        format="json",
    )
    assert r.status_code == 400
    assert r.json()["field"] == "memories[0].team_id"


def test_unrestricted_scope_sees_every_org_and_logs_a_warning(world, rows, caplog):
    with caplog.at_level("WARNING", logger="mnemo.access"):
        principal = Principal.unrestricted(reason="test")
    assert "Unrestricted scope used" in caplog.text
    assert Memory.objects.visible_to(principal).count() == len(rows)


def test_unrestricted_scope_writes_nothing_without_an_org(world, rows):
    principal = Principal.unrestricted(reason="test")
    with pytest.raises(NoAccess, match="no organization"):
        services.memory_remember(
            principal=principal, items=[MemoryInput(content="whose is this?")]
        )
    assert Memory.objects.filter(content="whose is this?").count() == 0
    assert Memory.objects.count() == len(rows)


def test_derived_rows_never_widen_visibility(world, rows):
    alice = world.principal("alice")
    derived = services.memory_remember(
        principal=alice,
        items=[
            MemoryInput(
                content="summary",
                tier="semantic",
                kind="fact",
                visibility="org",
                derived_from=(rows["alice_private"].pk,),
            )
        ],
        enqueue=False,
    ).memories[0]
    assert derived.visibility == "private"
    assert derived.owner_user_id == world.alice.pk
