"""Who is asking: a person (user) or an agent, always inside one organization.

Every read starts from a Principal (``Memory.objects.visible_to(principal)``).
The rules: ``private`` rows are visible to their owner only; ``team`` rows to members
of that team and agents bound to it; ``org`` rows to everyone in the org; nothing ever
crosses orgs. A superuser may use the named ``Principal.unrestricted()`` scope, which
logs a warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from accounts.models import ADMIN_ROLES, WRITE_ROLES, Agent, Membership, Role

logger = logging.getLogger("mnemo.access")


class NoAccess(Exception):
    """The principal has no membership in the requested organization."""


@dataclass(frozen=True)
class Principal:
    """An immutable view of who is asking, resolved once per request or task."""

    kind: str  # "user" | "agent" | "unrestricted"
    org_id: int | None
    user_id: int | None = None
    agent_id: int | None = None
    team_ids: frozenset[int] = field(default_factory=frozenset)
    role: str = Role.VIEWER
    read_only: bool = False
    read_scopes: dict | None = None  # type: ignore[type-arg]

    @property
    def owner_org_id(self) -> int:
        """The org that rows this principal writes belong to (unrestricted has none)."""
        if self.org_id is None:
            raise NoAccess("this principal belongs to no organization")
        return self.org_id

    @property
    def is_unrestricted(self) -> bool:
        return self.kind == "unrestricted"

    @property
    def can_write(self) -> bool:
        if self.kind == "agent":
            return not self.read_only
        return self.role in WRITE_ROLES

    @property
    def is_org_admin(self) -> bool:
        return self.kind == "user" and self.role in ADMIN_ROLES

    @property
    def label(self) -> str:
        if self.kind == "agent":
            return f"agent:{self.agent_id}"
        if self.kind == "user":
            return f"user:{self.user_id}"
        return "unrestricted"

    @classmethod
    def for_agent(cls, agent: Agent, *, read_only: bool = False) -> Principal:
        return cls(
            kind="agent",
            org_id=agent.org_id,
            agent_id=agent.pk,
            user_id=agent.acting_user_id,
            team_ids=frozenset([agent.team_id]) if agent.team_id else frozenset(),
            role=Role.MEMBER,
            read_only=read_only,
            read_scopes=agent.read_scopes or None,
        )

    @classmethod
    def for_user(cls, user: Any, org_id: int | None = None) -> Principal:
        """The user's principal in ``org_id`` (default: their first org by name)."""
        qs = Membership.objects.filter(user_id=user.pk).select_related("org")
        if org_id is not None:
            qs = qs.filter(org_id=org_id)
        membership = qs.order_by("org__name", "org_id").first()
        if membership is None:
            raise NoAccess("not a member of this organization")
        team_ids = frozenset(membership.teams.values_list("id", flat=True))
        return cls(
            kind="user",
            org_id=membership.org_id,
            user_id=membership.user_id,
            team_ids=team_ids,
            role=membership.role,
        )

    @classmethod
    def unrestricted(cls, *, reason: str) -> Principal:
        """Superuser/maintenance scope that sees every org; logged on every use."""
        logger.warning("Unrestricted scope used: %s", reason)
        return cls(kind="unrestricted", org_id=None, role=Role.OWNER)
