"""Django admin: staff org admins see and edit only their own org's objects."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, Role
from memory import services
from memory.models import Memory
from memory.services import MemoryInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins(world):
    world.olivia.is_staff = True
    world.olivia.save()
    world.carol.is_staff = True
    world.carol.save()
    Membership.objects.filter(user=world.carol).update(role=Role.ADMIN)
    acme = services.memory_remember(
        principal=world.principal("alice"),
        enqueue=False,
        items=[MemoryInput(content="acme row", visibility="org")],
    )
    globex = services.memory_remember(
        principal=world.principal("carol"),
        enqueue=False,
        items=[MemoryInput(content="globex row")],
    )
    return acme.memories[0], globex.memories[0]


def test_an_org_admin_sees_only_their_orgs_memories_in_admin(client, world, admins):
    acme_row, globex_row = admins
    client.force_login(world.olivia)
    page = client.get("/admin/memory/memory/").content.decode()
    assert "acme row" in page and "globex row" not in page
    assert client.get(f"/admin/memory/memory/{acme_row.pk}/change/").status_code == 200
    other = client.get(f"/admin/memory/memory/{globex_row.pk}/change/")
    assert other.status_code in (302, 404)
    assert "globex row" not in other.content.decode()


def test_an_org_admin_changes_visibility_but_never_content(client, world, admins):
    acme_row, _ = admins
    client.force_login(world.olivia)
    r = client.post(
        f"/admin/memory/memory/{acme_row.pk}/change/",
        {"visibility": "team", "team": world.team_a.pk, "content": "hacked"},
    )
    assert r.status_code == 302, r.content[:500]
    row = Memory.objects.get(pk=acme_row.pk)
    assert row.visibility == "team" and row.content == "acme row"


def test_members_who_are_not_org_admins_get_no_admin(client, world, admins):
    world.alice.is_staff = True
    world.alice.save()
    client.force_login(world.alice)
    assert client.get("/admin/memory/memory/").status_code == 403


def test_a_superuser_sees_every_org(client, world, admins):
    root = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(root)
    page = client.get("/admin/memory/memory/").content.decode()
    assert "acme row" in page and "globex row" in page
