"""A small, deterministic demo organization.

People, an agent, a key and a few hundred memories.

The conversations are generated from templates here (no benchmark data is shipped).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Agent, ApiKey, Membership, Organization, Role, Team
from accounts.principals import Principal
from memory import services
from memory.models import Memory

PEOPLE = ["Maya", "Theo", "Priya", "Jonas"]
PLACES = ["Lisbon", "Kyoto", "Denver", "Oslo", "Nairobi", "Montreal"]
HOBBIES = [
    "pottery",
    "bouldering",
    "sourdough baking",
    "trail running",
    "chess",
    "violin",
]
PROJECTS = [
    "the billing migration",
    "the search revamp",
    "the mobile onboarding",
    "the Q3 audit",
]
TEMPLATES = [
    ("{a}", "I just got back from {place}, the food there was amazing."),
    ("{b}", "Nice! Did you get to try any {hobby} while you were in {place}?"),
    ("{a}", "Not this time, but I signed up for a {hobby} class starting next week."),
    ("{b}", "I'm still stuck on {project}; the deadline moved to Friday."),
    ("{a}", "Want me to pair with you on {project} tomorrow morning?"),
    ("{b}", "Yes please. Also, my sister is moving to {place2} next month."),
    ("{a}", "That's a big move. Is she going for work?"),
    ("{b}", "She got a job at a hospital there, she starts on the 3rd."),
    ("{a}", "Remind me to send her the list of cafes I liked in {place2}."),
    ("{b}", "Will do. By the way, I adopted a dog last weekend, her name is {dog}."),
    ("{a}", "Congrats! {dog} is a lovely name. What breed?"),
    ("{b}", "A border collie, very energetic, so lots of {hobby2} for me now."),
]
DOGS = ["Pepper", "Biscuit", "Luna", "Miso"]
FACTS = [
    "{a} prefers async standups over meetings.",
    "{b} is allergic to peanuts.",
    "{a} leads {project}.",
    "{b} lives in {place}.",
]
PROCEDURES = [
    "To deploy the API: run the migrations first, "
    "then restart the web workers one by one.",
    "When a customer reports a billing error, "
    "check the invoice ledger before refunding.",
    "Rule: never paste API keys into chat; rotate any key that was shared.",
]


@dataclass(frozen=True)
class DemoCredentials:
    admin_username: str
    admin_password: str
    api_key: str
    org: Organization


def _key_file() -> Path:
    return Path(settings.VAR_DIR) / "demo_api_key"


def seed_demo(*, sessions: int = 24, seed: int = 7) -> DemoCredentials:
    """Create (once) the demo org and its data; return the logins to print."""
    User = get_user_model()
    password = "mnemo-demo"
    with transaction.atomic():
        org, created = Organization.objects.get_or_create(
            slug="demo", defaults={"name": "Demo Org"}
        )
        team_a, _ = Team.objects.get_or_create(
            org=org, slug="research", defaults={"name": "Research"}
        )
        team_b, _ = Team.objects.get_or_create(
            org=org, slug="support", defaults={"name": "Support"}
        )
        admin, made = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        if made:
            admin.set_password(password)
            admin.save()
        m, _ = Membership.objects.get_or_create(
            user=admin, org=org, defaults={"role": Role.OWNER}
        )
        m.teams.add(team_a, team_b)
        for name, team, role in [
            ("alice", team_a, Role.MEMBER),
            ("bob", team_b, Role.MEMBER),
            ("vera", None, Role.VIEWER),
        ]:
            user, made = User.objects.get_or_create(username=name)
            if made:
                user.set_password(password)
                user.save()
            mm, _ = Membership.objects.get_or_create(
                user=user, org=org, defaults={"role": role}
            )
            if team:
                mm.teams.add(team)
        agent, _ = Agent.objects.get_or_create(
            org=org,
            name="demo-agent",
            defaults={"team": team_a, "default_visibility": "team"},
        )
    key_path = _key_file()
    plaintext = key_path.read_text().strip() if key_path.exists() else ""
    from accounts.authentication import authenticate_key

    if not plaintext or authenticate_key(plaintext) is None:
        _, plaintext = ApiKey.issue(agent=agent, name="demo key", created_by=admin)
        key_path.parent.mkdir(parents=True, exist_ok=True)
        key_path.write_text(plaintext)
        key_path.chmod(0o600)
    if not Memory.objects.filter(org=org).exists():
        _seed_memories(org, agent, sessions=sessions, seed=seed)
    return DemoCredentials("admin", password, plaintext, org)


def _seed_memories(
    org: Organization, agent: Agent, *, sessions: int, seed: int
) -> None:
    rng = random.Random(seed)
    principal = Principal.for_agent(agent)
    start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    for n in range(sessions):
        a, b = rng.sample(PEOPLE, 2)
        values = {
            "a": a,
            "b": b,
            "place": rng.choice(PLACES),
            "place2": rng.choice(PLACES),
            "hobby": rng.choice(HOBBIES),
            "hobby2": rng.choice(HOBBIES),
            "project": rng.choice(PROJECTS),
            "dog": rng.choice(DOGS),
        }
        when = start + timedelta(
            days=n * 9 + rng.randint(0, 4), hours=rng.randint(0, 8)
        )
        session = services.session_create(
            principal=principal,
            external_id=f"demo-{n + 1:03d}",
            participants=[a, b],
            started_at=when,
            visibility="org" if n % 3 else "team",
        )
        items = []
        for i, (who, text) in enumerate(TEMPLATES):
            speaker = values[who.strip("{}")]
            items.append(
                services.MemoryInput(
                    content=text.format(**values),
                    speaker=speaker,
                    role="user" if speaker == a else "assistant",
                    occurred_at=when + timedelta(minutes=2 * i),
                    external_ref=f"D{n + 1}:{i + 1}",
                )
            )
        services.memory_remember(
            principal=principal, items=items, session=session, field_prefix="messages"
        )
        facts = [
            services.MemoryInput(
                content=f.format(**values),
                tier="semantic",
                kind="fact",
                visibility="org",
                occurred_at=when,
            )
            for f in rng.sample(FACTS, 2)
        ]
        services.memory_remember(principal=principal, items=facts)
    services.memory_remember(
        principal=principal,
        items=[
            services.MemoryInput(
                content=p,
                tier="procedural",
                kind="rule" if p.startswith("Rule") else "procedure",
                visibility="org",
            )
            for p in PROCEDURES
        ],
    )
