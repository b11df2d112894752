"""Conflicts queue: open cases side by side, resolve / both valid / dismiss, history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from memory.services import Forbidden, StateConflict, WriteError
from ui import queues
from ui.forms import ConflictActionForm, ConflictFilterForm, bounds_from_post
from ui.views.base import (
    operator_view,
    paginate,
    principal_of,
    refusal,
    render_page,
    require_writer,
)


def resolution_service() -> Callable[..., Any] | None:
    """The knowledge tiers' resolution service (``memory.conflict_resolution``)."""
    from memory.conflict_resolution import conflict_resolve

    return conflict_resolve


@require_GET
@operator_view
def conflict_list(request: HttpRequest) -> HttpResponse:
    form = ConflictFilterForm(request.GET or None)
    status = form.cleaned_data.get("status") if form.is_valid() else ""
    principal = principal_of(request)
    page = paginate(request, queues.conflict_queue(principal, status or "open"), 10)
    cases = queues.conflict_cases(principal, page.object_list)
    return render_page(
        request,
        "ui/conflict_list.html",
        {
            "form": form,
            "page": page,
            "cases": cases,
            "can_resolve": principal.can_write and resolution_service() is not None,
            "service_missing": resolution_service() is None,
        },
        partial="queue",
    )


@require_POST
@operator_view
def conflict_action(request: HttpRequest, conflict_id: int) -> HttpResponse:
    """Resolve, mark both valid (with bounds) or dismiss one case, with a note."""
    principal = principal_of(request)
    conflict = queues.access_conflict(principal, conflict_id)  # 404 before 403
    require_writer(principal)
    service = resolution_service()
    if service is None:
        return refusal(request, 403, "Conflict resolution is not available yet.")
    form = ConflictActionForm(request.POST)
    back = request.POST.get("next") or ""
    target = back if back.startswith("/conflicts") else "/conflicts/"
    if not form.is_valid():
        messages.error(
            request, " ".join(str(m) for e in form.errors.values() for m in e)
        )
        return redirect(target)
    alternative_ids = list(conflict.alternatives.values_list("memory_id", flat=True))
    data = form.cleaned_data
    try:
        service(
            principal=principal,
            conflict_id=conflict.pk,
            action=data["action"],
            chosen_id=data.get("chosen"),
            bounds=bounds_from_post(request.POST, alternative_ids),
            note=data.get("note") or "",
        )
    except (StateConflict, WriteError, Forbidden, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", None) or [str(exc)]))
        return redirect(target)
    label = dict(ConflictActionForm.ACTIONS)[data["action"]].lower()
    messages.success(request, f"Conflict #{conflict.pk}: {label} recorded.")
    return redirect(target)
