"""API-key authentication: one hand-written lookup, the same rules as the ORM had."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accounts.authentication import (
    AgentIdentity,
    authenticate_key,
    principal_for_request,
)
from accounts.models import Agent, ApiKey

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
