"""DRF authentication for agents: ``Authorization: Bearer mnemo_<prefix>_<secret>``."""

from __future__ import annotations

import hmac
import json
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts import rls
from accounts.models import Agent, ApiKey, hash_secret
from accounts.principals import Principal
from config.db.prepared import lookup_rows

# last_used_at is written at most this often per key, to keep writes off the hot path.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class AgentIdentity:
    """Stands in for ``request.user`` when an agent authenticates with an API key."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    is_anonymous = False

    def __init__(self, key: ApiKey) -> None:
        self.key = key
        self.agent = key.agent
        self.pk = None
        self.username = f"agent:{key.agent_id}"

    def __str__(self) -> str:
        return self.username


def parse_key(raw: str) -> tuple[str, str] | None:
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != "mnemo" or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


# One hand-written statement: compiling the ORM's select_related query cost more than
# running it (~2 ms of every API request; docs/benchmarks.md, session 6).
_KEY_SQL = (
    "SELECT k.id, k.org_id, k.prefix, k.hashed_secret, k.read_only, "
    "k.rate_limit_per_minute, k.last_used_at, a.id, a.org_id, a.name, a.team_id, "
    "a.acting_user_id, a.default_visibility, a.read_scopes::text "
    "FROM accounts_apikey k JOIN accounts_agent a ON a.id = k.agent_id "
    "WHERE k.prefix = %s AND k.revoked_at IS NULL AND a.is_active"
)

_TOUCH_SQL = (
    "UPDATE accounts_apikey SET last_used_at = %s WHERE id = (SELECT id FROM "
    "accounts_apikey WHERE id = %s FOR NO KEY UPDATE SKIP LOCKED)"
)


def authenticate_key(raw: str) -> ApiKey | None:
    """Return the active key (its agent loaded) for a plaintext ``mnemo_…`` string."""
    parsed = parse_key(raw)
    if parsed is None:
        return None
    prefix, secret = parsed
    rows = lookup_rows(_KEY_SQL, [prefix])  # planned once per connection
    row = rows[0] if rows else None
    if row is None or not hmac.compare_digest(row[3], hash_secret(secret)):
        return None
    agent = Agent(
        id=row[7],
        org_id=row[8],
        name=row[9],
        team_id=row[10],
        acting_user_id=row[11],
        default_visibility=row[12],
        read_scopes=json.loads(row[13]) if row[13] else {},
        is_active=True,
    )
    agent._state.adding = False
    key = ApiKey(
        id=row[0],
        agent=agent,
        org_id=row[1],
        prefix=row[2],
        hashed_secret=row[3],
        read_only=row[4],
        rate_limit_per_minute=row[5],
        last_used_at=row[6],
        revoked_at=None,
    )
    key._state.adding = False
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        # The request's transaction holds the row lock until it commits, and every
        # concurrent request with the same key saw the same stale time: they queued
        # behind it (22 ms per update under load, docs/benchmarks.md session 12). A
        # request that finds the row locked leaves the update to the one holding it.
        with connection.cursor() as cursor:
            cursor.execute(_TOUCH_SQL, [now, key.pk])
        key.last_used_at = now
    return key


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode(
            errors="replace"
        )
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        key = authenticate_key(raw)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return AgentIdentity(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="mnemo"'


def principal_for_request(request: Any) -> Principal:
    """Resolve the principal of an authenticated DRF or Django request.

    Agents: from their API key. People: their membership in the org named by the
    ``X-Mnemo-Org`` header (API) or the session's active org (UI), else their first org.
    Raises ``NoAccess`` for a person without membership there.
    """
    cached = getattr(request, "_mnemo_principal", None)
    if cached is not None:
        return cached
    user = request.user
    if isinstance(user, AgentIdentity):
        principal = Principal.for_agent(user.agent, read_only=user.key.read_only)
    else:
        org_id: int | None = None
        header = request.META.get("HTTP_X_MNEMO_ORG")
        if header:
            try:
                org_id = int(header)
            except ValueError:
                org_id = -1
        elif hasattr(request, "session"):
            org_id = request.session.get("mnemo_org_id")
        principal = Principal.for_user(user, org_id)
    # Row-level security: from here on the request's transaction sees only this org.
    rls.activate_principal(principal)
    request._mnemo_principal = principal
    return principal
