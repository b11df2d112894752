"""Personas and clients shared by the suite.

Org "acme" has teams A and B. alice is a member in team A, bob in team B, vera a
viewer in no team, olivia an org admin in both teams; carol belongs to org "globex"
only; nora is a user with no membership at all. agent_a is an agent bound to team A.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.models import Agent, ApiKey, Membership, Organization, Role, Team
from accounts.principals import Principal


@dataclass
class World:
    acme: Organization
    globex: Organization
    team_a: Team
    team_b: Team
    alice: Any
    bob: Any
    vera: Any
    olivia: Any
    carol: Any
    nora: Any
    agent_a: Agent
    agent_a_key: str
    agent_globex: Agent
    agent_globex_key: str

    def principal(self, name: str) -> Principal:
        if name == "agent_a":
            return Principal.for_agent(self.agent_a)
        if name == "agent_globex":
            return Principal.for_agent(self.agent_globex)
        return Principal.for_user(getattr(self, name))


def _member(user: Any, org: Organization, role: str, *teams: Team) -> None:
    m = Membership.objects.create(user=user, org=org, role=role)
    if teams:
        m.teams.add(*teams)


@pytest.fixture
def world(db: Any) -> World:
    User = get_user_model()
    acme = Organization.objects.create(name="Acme", slug="acme")
    globex = Organization.objects.create(name="Globex", slug="globex")
    team_a = Team.objects.create(org=acme, name="Team A", slug="a")
    team_b = Team.objects.create(org=acme, name="Team B", slug="b")
    users = {
        n: User.objects.create_user(n, password="pw-" + n)
        for n in ["alice", "bob", "vera", "olivia", "carol", "nora"]
    }
    _member(users["alice"], acme, Role.MEMBER, team_a)
    _member(users["bob"], acme, Role.MEMBER, team_b)
    _member(users["vera"], acme, Role.VIEWER)
    _member(users["olivia"], acme, Role.ADMIN, team_a, team_b)
    _member(users["carol"], globex, Role.MEMBER)
    agent_a = Agent.objects.create(
        org=acme, name="agent-a", team=team_a, default_visibility="team"
    )
    _, key_a = ApiKey.issue(agent=agent_a)
    agent_g = Agent.objects.create(org=globex, name="agent-g", default_visibility="org")
    _, key_g = ApiKey.issue(agent=agent_g)
    return World(
        acme,
        globex,
        team_a,
        team_b,
        users["alice"],
        users["bob"],
        users["vera"],
        users["olivia"],
        users["carol"],
        users["nora"],
        agent_a,
        key_a,
        agent_g,
        key_g,
    )


def prepared_plans(statement_prefix: str) -> tuple[int, int]:
    """(generic, custom) plans so far of this connection's prepared statements whose
    text starts with ``statement_prefix`` (config.db.prepared.lookup_rows)."""
    from django.db import connection

    with connection.cursor() as c:
        c.execute(
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            [statement_prefix + "%"],
        )
        ((generic, custom),) = c.fetchall()
    return int(generic or 0), int(custom or 0)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def client_for(world: World, name: str) -> APIClient:
    """An API client authenticated as persona ``name`` (API key or session login)."""
    client = APIClient()
    if name == "agent_a":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.agent_a_key}")
    elif name == "agent_globex":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.agent_globex_key}")
    elif name != "anonymous":
        client.force_login(getattr(world, name))
    return client


@pytest.fixture
def as_persona(world: World):  # type: ignore[no-untyped-def]
    return lambda name: client_for(world, name)


@pytest.fixture(autouse=True)
def _fresh_recall_caches() -> Any:
    """Recall's per-process caches (store presence, term counts, speakers) are keyed
    by ids that another test's rolled-back rows may have used: start each test empty."""
    from recall import channels

    channels.clear_caches()
    yield
