"""API-key authentication: one hand-written lookup, the same rules as the ORM had."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from django.db import connection, connections, transaction

from accounts.authentication import (
    AgentIdentity,
    authenticate_key,
    principal_for_request,
)
from accounts.models import Agent, ApiKey
from tests.conftest import prepared_plans

pytestmark = pytest.mark.django_db


def _agent(world, **fields) -> tuple[Agent, str]:
    agent = Agent.objects.create(org=world.acme, name="scoped", **fields)
    return agent, ApiKey.issue(agent=agent, name="t", read_only=True)[1]


def test_the_key_carries_what_the_principal_is_built_from(world):
    agent, plaintext = _agent(
        world,
        team=world.team_a,
        acting_user=world.alice,
        read_scopes={"tiers": ["semantic"]},
    )
    key = authenticate_key(plaintext)
    assert key is not None
    assert (key.agent.pk, key.agent.org_id, key.org_id) == (
        agent.pk,
        world.acme.pk,
        world.acme.pk,
    )
    assert key.agent.team_id == world.team_a.pk
    assert key.agent.acting_user_id == world.alice.pk
    assert key.agent.read_scopes == {"tiers": ["semantic"]}
    assert key.read_only is True
    assert key.last_used_at is not None  # recorded on first use

    principal = principal_for_request(SimpleNamespace(user=AgentIdentity(key)))
    assert principal.agent_id == agent.pk
    assert principal.team_ids == frozenset([world.team_a.pk])
    assert principal.user_id == world.alice.pk
    assert principal.read_only and principal.read_scopes == {"tiers": ["semantic"]}


@pytest.mark.parametrize(
    "mangle",
    [
        lambda p: p[:-1] + ("A" if p[-1] != "A" else "B"),  # wrong secret
        lambda p: "mnemo_ffffffff_" + p.split("_", 2)[2],  # unknown prefix
        lambda p: p.replace("mnemo_", "other_"),  # not a Mnemo key
        lambda p: "mnemo__",
    ],
)
def test_a_wrong_key_is_refused(world, mangle):
    _, plaintext = _agent(world)
    assert authenticate_key(mangle(plaintext)) is None


def test_a_revoked_key_or_a_deactivated_agent_is_refused(world):
    agent, plaintext = _agent(world)
    assert authenticate_key(plaintext) is not None
    agent.is_active = False
    agent.save()
    assert authenticate_key(plaintext) is None
    agent.is_active = True
    agent.save()
    ApiKey.objects.get(agent=agent).revoke()
    assert authenticate_key(plaintext) is None


def test_first_use_is_stored_on_the_key(world):
    _, plaintext = _agent(world)
    key = authenticate_key(plaintext)
    stored = ApiKey.objects.get(pk=key.pk)
    assert stored.last_used_at is not None
    assert stored.last_used_at == key.last_used_at


@pytest.mark.django_db(transaction=True)
def test_a_request_does_not_wait_for_another_that_is_recording_the_same_key(world):
    """Concurrent requests with one key all see the same stale ``last_used_at``; the
    first holds the row lock until its request's transaction ends, and the others
    must not queue behind it (they skip the update)."""
    _, plaintext = _agent(world)
    locked, release, done = threading.Event(), threading.Event(), threading.Event()
    prefix = plaintext.split("_")[1]

    def holder() -> None:
        try:
            with transaction.atomic():
                ApiKey.objects.select_for_update().get(prefix=prefix)
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert locked.wait(10)
        with transaction.atomic(), connection.cursor() as c:
            # Waiting for the lock would fail the request here instead of hanging.
            c.execute("SET LOCAL lock_timeout = '1s'")
            key = authenticate_key(plaintext)
        assert key is not None
        assert ApiKey.objects.get(pk=key.pk).last_used_at is None  # left to the holder
    finally:
        release.set()
        thread.join(10)
    assert done.is_set()
    # With the row free again, the next request records the use.
    authenticate_key(plaintext)
    assert ApiKey.objects.get(pk=key.pk).last_used_at is not None


def test_the_key_lookup_is_planned_once_per_connection(world, settings):
    """The lookup runs as a prepared statement with a generic plan (planning it was
    most of its cost) and still tells keys apart: another org's key, a wrong secret,
    a revoked key."""
    for _ in range(3):
        assert authenticate_key(world.agent_a_key).agent.pk == world.agent_a.pk
    assert authenticate_key(world.agent_globex_key).org_id == world.globex.pk
    assert prepared_plans("SELECT k.id, k.org_id") == (4, 0)
    assert authenticate_key(world.agent_a_key[:-1] + "x") is None
    ApiKey.objects.filter(agent=world.agent_a).update(revoked_at="2026-01-01T00:00Z")
    assert authenticate_key(world.agent_a_key) is None
    settings.MNEMO_RECALL_GENERIC_PLANS = False  # Django's cursor: same answers
    assert authenticate_key(world.agent_a_key) is None
    assert authenticate_key(world.agent_globex_key).org_id == world.globex.pk
