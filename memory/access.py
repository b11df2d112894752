"""The one door for reads: visibility rules as a Q object and a QuerySet mixin.

Every model that holds memory content carries ``org``, ``visibility``, ``team``,
``owner_user`` and ``owner_agent`` (the :class:`AccessControlled` mixin) and its
QuerySet offers ``visible_to(principal)``. Views, services, the recall channels' SQL and
the admin all start from it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.models import Visibility
from accounts.principals import Principal
from config.db.arrays import IntArray


def visibility_q(principal: Principal, prefix: str = "") -> Q:
    """Rows ``principal`` may read; ``prefix`` (``"memory__"``) for related lookups."""
    if principal.is_unrestricted:
        return Q()
    p = prefix
    rule = Q(**{f"{p}visibility": Visibility.ORG})
    if principal.team_ids:
        rule |= Q(
            **{f"{p}visibility": Visibility.TEAM, f"{p}team_id__in": principal.team_ids}
        )
    if principal.agent_id is not None:
        rule |= Q(
            **{
                f"{p}visibility": Visibility.PRIVATE,
                f"{p}owner_agent_id": principal.agent_id,
            }
        )
    if principal.user_id is not None:
        # A user's private rows, including those their agents wrote for them; an agent
        # acting for a user reads that user's private rows too.
        rule |= Q(
            **{
                f"{p}visibility": Visibility.PRIVATE,
                f"{p}owner_user_id": principal.user_id,
            }
        )
    return Q(**{f"{p}org_id": principal.org_id}) & rule


def visibility_sql(principal: Principal, alias: str) -> tuple[str, list[Any]]:
    """The rule of :func:`visibility_q` as a SQL fragment for hand-written queries."""
    if principal.is_unrestricted:
        return "TRUE", []
    a = alias
    parts = [f"{a}.visibility = 'org'"]
    params: list[Any] = [principal.org_id]
    if principal.team_ids:
        parts.append(f"({a}.visibility = 'team' AND {a}.team_id = ANY(%s))")
        params.append(IntArray(principal.team_ids))
    if principal.agent_id is not None:
        parts.append(f"({a}.visibility = 'private' AND {a}.owner_agent_id = %s)")
        params.append(principal.agent_id)
    if principal.user_id is not None:
        parts.append(f"({a}.visibility = 'private' AND {a}.owner_user_id = %s)")
        params.append(principal.user_id)
    return f"({a}.org_id = %s AND ({' OR '.join(parts)}))", params


class VisibleQuerySet(models.QuerySet):  # type: ignore[type-arg]
    def visible_to(self, principal: Principal) -> Any:
        return self.filter(visibility_q(principal))


class AccessControlled(models.Model):
    """Org, owner, team and visibility: the fields every content-holding row carries."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.ORG
    )
    team = models.ForeignKey(
        "accounts.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    owner_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    owner_agent = models.ForeignKey(
        "accounts.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        abstract = True
