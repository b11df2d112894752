"""The audit trail: one append-only :class:`~accounts.models.AuditEvent` per action.

Recorded: conflict resolution, feedback review, supersede / retract through the API,
API-key creation and revocation, visibility and other admin changes, playground
impersonation. ``audit_record`` writes inside the caller's transaction, so an action
that rolls back leaves no event, and an event is never written for an action that did
not happen. Org admins read their org's events in the console (``/audit/``) and export
them as JSON lines.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Model

from accounts.models import AuditEvent

logger = logging.getLogger("mnemo.audit")

# Actions, named <object>.<verb>; the console filters by these.
ACTIONS = (
    "conflict.resolve",
    "feedback.review",
    "memory.supersede",
    "memory.retract",
    "apikey.create",
    "apikey.revoke",
    "visibility.change",
    "playground.impersonate",
    "admin.add",
    "admin.change",
    "admin.delete",
)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of ``value`` (models become their primary key)."""
    if isinstance(value, Model):
        return value.pk
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if hasattr(value, "all") and callable(value.all):  # a related manager / queryset
        return sorted(jsonable(v) for v in value.all())
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def request_context(request: Any) -> dict[str, str]:
    """Where an action came from (path, client address, user agent)."""
    if request is None:
        return {}
    meta = getattr(request, "META", {})
    return {
        "path": str(getattr(request, "path", ""))[:300],
        "ip": str(meta.get("REMOTE_ADDR", ""))[:64],
        "user_agent": str(meta.get("HTTP_USER_AGENT", ""))[:200],
    }


def actor_of(principal: Any = None, user: Any = None) -> tuple[str, str]:
    """(label, display name) of whoever acts: a principal, else a Django user."""
    if principal is not None:
        name = ""
        if user is not None:
            name = getattr(user, "username", "")
        return principal.label, name
    if user is not None and getattr(user, "pk", None) is not None:
        return f"user:{user.pk}", getattr(user, "username", "")
    return "system", ""


def audit_record(
    *,
    org_id: int | None,
    action: str,
    principal: Any = None,
    user: Any = None,
    target: Model | None = None,
    target_type: str = "",
    target_id: Any = "",
    before: Any = None,
    after: Any = None,
    note: str = "",
    request: Any = None,
    actor: str = "",
) -> AuditEvent:
    """Append one event to ``org_id``'s audit log (in the caller's transaction)."""
    label, actor_name = actor_of(principal, user)
    actor = actor or label
    if target is not None:
        target_type = target_type or target._meta.label_lower
        target_id = target.pk
    return AuditEvent.objects.create(
        org_id=org_id,
        actor=actor,
        actor_name=actor_name[:200],
        action=action,
        target_type=target_type[:60],
        target_id=str(target_id or "")[:60],
        before=jsonable(before),
        after=jsonable(after),
        note=note[:5000],
        context=request_context(request),
    )


def as_dict(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.pk,
        "at": event.at.isoformat(),
        "org": event.org_id,
        "actor": event.actor,
        "actor_name": event.actor_name,
        "action": event.action,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "before": event.before,
        "after": event.after,
        "note": event.note,
        "context": event.context,
    }


def export_lines(events: Iterable[AuditEvent]) -> Iterator[str]:
    """One JSON object per line, oldest first as given."""
    for event in events:
        yield json.dumps(as_dict(event), sort_keys=True, ensure_ascii=False) + "\n"


def model_fields(obj: Model, names: Iterable[str]) -> dict[str, Any]:
    """The current values of ``names`` on ``obj`` (for before/after snapshots)."""
    out: dict[str, Any] = {}
    for name in names:
        field = obj._meta.get_field(name)
        if field.many_to_many:
            out[name] = jsonable(getattr(obj, name)) if obj.pk else []
        else:
            attname = getattr(field, "attname", name)
            out[name] = jsonable(getattr(obj, attname, None))
    return out


def admin_action(model_label: str, *, adding: bool, changed: Iterable[str]) -> str:
    """The audit action for an admin save of ``model_label``."""
    changed = set(changed)
    if model_label == "accounts.apikey":
        if adding:
            return "apikey.create"
        if "revoked_at" in changed:
            return "apikey.revoke"
    if not adding and changed & {"visibility", "team"}:
        return "visibility.change"
    return "admin.add" if adding else "admin.change"
