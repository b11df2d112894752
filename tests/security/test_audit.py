"""The audit trail: operator and admin actions leave who/when/what/before/after."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from accounts.models import ApiKey, AuditEvent
from memory.models import Conflict, ConflictAlternative, Memory
from memory.services import MemoryInput, memory_remember
from recall.models import Feedback, RecallEvent
from tests.conftest import World, client_for

pytestmark = pytest.mark.django_db


def _facts(world: World, *texts: str) -> list[Memory]:
    return memory_remember(
        principal=world.principal("alice"),
        items=[
            MemoryInput(content=t, tier="semantic", kind="fact", visibility="org")
            for t in texts
        ],
    ).memories


def test_resolving_a_conflict_is_audited_with_before_and_after(world: World) -> None:
    a, b = _facts(world, "Dana lives in Oslo", "Dana lives in Rome")
    conflict = Conflict.objects.create(org=world.acme, kind="fact_conflict")
    for m in (a, b):
        ConflictAlternative.objects.create(conflict=conflict, memory=m)
    response = client_for(world, "alice").post(
        f"/api/v1/conflicts/{conflict.pk}/resolve",
        {"action": "choose", "chosen": b.pk, "note": "moved in May"},
        format="json",
    )
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="conflict.resolve")
    assert (event.org_id, event.actor, event.target_id) == (
        world.acme.pk,
        f"user:{world.alice.pk}",
        str(conflict.pk),
    )
    assert event.before == {"status": "open"}
    assert (
        event.after["status"] == "resolved"
        and event.after["resolution"]["chosen"] == b.pk
    )
    assert event.note == "moved in May"


def test_supersede_and_retract_through_the_api_are_audited(world: World) -> None:
    (row,) = _facts(world, "The wifi password is hunter2")
    client = client_for(world, "alice")
    new = client.post(
        f"/api/v1/memories/{row.pk}/supersede",
        {"content": "The wifi password is changed"},
        format="json",
    ).json()
    client.post(
        f"/api/v1/memories/{new['id']}/retract", {"reason": "secret"}, format="json"
    )
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "target_id"))
    assert actions == [
        ("memory.supersede", str(row.pk)),
        ("memory.retract", str(new["id"])),
    ]
    retract = AuditEvent.objects.get(action="memory.retract")
    assert retract.context["path"].endswith("/retract") and retract.note == "secret"


def test_feedback_review_in_the_console_is_audited(world: World) -> None:
    (row,) = _facts(world, "Lunch is at noon")
    event = RecallEvent.objects.create(
        org=world.acme, principal="agent:1", query="lunch"
    )
    fb = Feedback.objects.create(
        org=world.acme, event=event, memory=row, verdict="wrong", author="agent:1"
    )
    response = client_for(world, "olivia").post(
        f"/feedback/{fb.pk}/review",
        {"decision": "reject", "action": "none", "note": "ok"},
    )
    assert response.status_code in (200, 302)
    audit = AuditEvent.objects.get(action="feedback.review")
    assert audit.actor == f"user:{world.olivia.pk}"
    assert audit.before == {"review_status": "new"}
    assert audit.after["review_status"] == "rejected"


def test_key_revocation_in_admin_is_audited(world: World) -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-root")
    key, _ = ApiKey.issue(agent=world.agent_a)
    client = client_for(world, "anonymous")
    client.force_login(root)
    response = client.post(
        "/admin/accounts/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    event = AuditEvent.objects.get(action="apikey.revoke")
    assert (event.org_id, event.actor, event.target_id) == (
        world.acme.pk,
        f"user:{root.pk}",
        str(key.pk),
    )
    assert event.before == {"revoked_at": None} and event.after["revoked_at"]


def test_org_admins_read_and_export_their_org_log_only(world: World) -> None:
    AuditEvent.objects.create(
        org=world.acme,
        actor="user:1",
        action="admin.change",
        note="<script>alert(1)</script>",
    )
    AuditEvent.objects.create(
        org=world.globex, actor="user:2", action="admin.change", note="globex-only-note"
    )
    olivia = client_for(world, "olivia")
    page = olivia.get("/audit/")
    body = page.content.decode()
    assert page.status_code == 200 and "admin.change" in body
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;" in body
    assert "globex-only-note" not in body
    export = olivia.get("/audit/export.jsonl")
    lines = [json.loads(line) for line in export.content.decode().splitlines()]
    assert export["Content-Type"].startswith("application/x-ndjson")
    assert [line["org"] for line in lines] == [world.acme.pk]
    for persona in ("alice", "vera", "carol"):
        assert client_for(world, persona).get("/audit/").status_code == 403, persona
        assert client_for(world, persona).get("/audit/export.jsonl").status_code == 403


def test_playground_impersonation_is_audited(world: World) -> None:
    olivia = client_for(world, "olivia")
    response = olivia.post(
        "/playground/",
        {
            "query": "what is for lunch",
            "as_principal": f"user:{world.bob.pk}",
            "explain": "on",
        },
    )
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="playground.impersonate")
    assert event.target_id == f"user:{world.bob.pk}"
    assert event.actor == f"user:{world.olivia.pk}"
    assert event.after == {"query": "what is for lunch"}
