"""Tenancy: organizations, teams, memberships, agents and their API keys."""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # noqa: F401


class Visibility(models.TextChoices):
    PRIVATE = "private", "Private (owner only)"
    TEAM = "team", "Team"
    ORG = "org", "Organization"


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


ADMIN_ROLES = frozenset({Role.OWNER, Role.ADMIN})
WRITE_ROLES = frozenset({Role.OWNER, Role.ADMIN, Role.MEMBER})


class Organization(models.Model):
    """A tenant. Every stored row belongs to exactly one organization."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    """A group inside an organization; `team` visibility is scoped to one."""

    org = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="teams"
    )
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["org", "slug"], name="team_unique_slug_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.slug}"


class Membership(models.Model):
    """A person's role in an organization, and the teams they belong to there."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    org = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    teams = models.ManyToManyField(Team, blank=True, related_name="memberships")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org", "user"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "org"], name="one_membership_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} ({self.role})"


class Agent(models.Model):
    """An automated principal acting for its org, optionally bound to a team, a user."""

    org = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(max_length=200)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    acting_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
        help_text="Private memories this agent writes are also visible to this user.",
    )
    default_visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.TEAM
    )
    read_scopes = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            'Optional limit on what recall returns, e.g. {"tiers": ["semantic"]}.'
        ),
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.org.slug})"


def hash_secret(secret: str) -> str:
    """API key secrets are 256-bit random, so a plain SHA-256 is a sufficient hash."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True, agent__is_active=True)


class ApiKey(models.Model):
    """A bearer key for an agent: `mnemo_<prefix>_<secret>`; only the hash is stored."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="api_keys")
    org = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_secret = models.CharField(max_length=64, editable=False)
    read_only = models.BooleanField(default=False)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Requests per minute for this key; empty = the default "
        "(MNEMO_RATE_LIMIT_PER_MINUTE).",
    )
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"mnemo_{self.prefix}_… ({self.agent})"

    @classmethod
    def issue(
        cls,
        *,
        agent: Agent,
        name: str = "",
        created_by: User | None = None,
        read_only: bool = False,
    ) -> tuple[ApiKey, str]:
        """Create a key and return it with its plaintext, which is never stored."""
        prefix = secrets.token_hex(4)
        secret = secrets.token_urlsafe(32)
        key = cls.objects.create(
            agent=agent,
            org=agent.org,
            name=name,
            prefix=prefix,
            hashed_secret=hash_secret(secret),
            created_by=created_by,
            read_only=read_only,
        )
        return key, f"mnemo_{prefix}_{secret}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def for_org(self, org_id: int) -> AuditEventQuerySet:
        return self.filter(org_id=org_id)


class AuditEvent(models.Model):
    """One operator or admin action: who, when, what, before and after. Append-only.

    The application's database role may insert and read these rows, never update or
    delete them (``config/db/roles.py``); ``save`` refuses to change a stored event.
    The org is kept without a foreign-key constraint so deleting an org, user or key
    never deletes its history.
    """

    org = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(
        max_length=100, help_text="user:<id>, agent:<id> or system"
    )
    actor_name = models.CharField(max_length=200, blank=True, default="")
    action = models.CharField(max_length=60)
    target_type = models.CharField(max_length=60, blank=True, default="")
    target_id = models.CharField(max_length=60, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    context = models.JSONField(
        default=dict, blank=True, help_text="path, ip, user agent"
    )

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["org", "-at"], name="audit_org_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None and not self._state.adding:
            raise ValueError("audit events are append-only")
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise ValueError("audit events are append-only")
