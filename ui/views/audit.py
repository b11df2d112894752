"""Audit log (org admins): who did what, when, before and after; JSON-lines export."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from accounts import audit
from accounts.models import AuditEvent
from ui.views.base import operator_view, paginate, principal_of, refusal, render_page

ADMINS_ONLY = "The audit log is for organization admins."


def _events(request: HttpRequest) -> tuple[object, str]:
    principal = principal_of(request)
    action = request.GET.get("action", "")
    qs = AuditEvent.objects.for_org(principal.org_id)  # type: ignore[arg-type]
    if action in audit.ACTIONS:
        qs = qs.filter(action=action)
    else:
        action = ""
    return qs, action


@require_GET
@operator_view
def audit_list(request: HttpRequest) -> HttpResponse:
    if not principal_of(request).is_org_admin:
        return refusal(request, 403, ADMINS_ONLY)
    events, action = _events(request)
    page = paginate(request, events, 50)
    return render_page(
        request,
        "ui/audit_list.html",
        {"page": page, "actions": audit.ACTIONS, "action": action},
        partial="events",
    )


@require_GET
@operator_view
def audit_export(request: HttpRequest) -> HttpResponse:
    """The org's events, oldest first, one JSON object per line."""
    principal = principal_of(request)
    if not principal.is_org_admin:
        return refusal(request, 403, ADMINS_ONLY)
    events, _ = _events(request)
    cap = settings.MNEMO_AUDIT_EXPORT_MAX_ROWS
    rows = list(events.order_by("at", "id")[: cap + 1])  # type: ignore[attr-defined]
    # Built inside the request's transaction: row-level security scopes the read.
    body = "".join(audit.export_lines(rows[:cap]))
    response = HttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="audit-org-{principal.org_id}.jsonl"'
    )
    if len(rows) > cap:
        response["X-Mnemo-Truncated"] = (
            f"first {cap} events; filter by action to see the rest"
        )
    return response
