"""Feedback review queue: accept (with an action on memory) or reject, with a note."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from memory.services import StateConflict, WriteError
from recall import feedback as feedback_services
from ui import queues
from ui.forms import FeedbackFilterForm, FeedbackReviewForm
from ui.views.base import (
    operator_view,
    paginate,
    principal_of,
    render_page,
    require_writer,
)


@require_GET
@operator_view
def feedback_list(request: HttpRequest) -> HttpResponse:
    form = FeedbackFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    principal = principal_of(request)
    page = paginate(request, queues.feedback_queue(principal, filters), 20)
    rows = queues.feedback_rows(principal, page.object_list)
    return render_page(
        request,
        "ui/feedback_list.html",
        {"form": form, "page": page, "rows": rows, "can_review": principal.can_write},
        partial="queue",
    )


@require_POST
@operator_view
def feedback_review(request: HttpRequest, feedback_id: int) -> HttpResponse:
    """Accept or reject one feedback item (the memory change: ``recall.feedback``)."""
    principal = principal_of(request)
    queues.access_feedback(principal, feedback_id)  # 404 before 403
    require_writer(principal)
    form = FeedbackReviewForm(request.POST)
    back = request.POST.get("next") or ""
    target = back if back.startswith("/feedback") else "/feedback/"
    if not form.is_valid():
        messages.error(
            request, " ".join(str(m) for e in form.errors.values() for m in e)
        )
        return redirect(target)
    data = form.cleaned_data
    try:
        if data["decision"] == "accept":
            feedback_services.feedback_accept(
                principal=principal,
                user=request.user,
                feedback_id=feedback_id,
                action=data["action"],
                correction=data.get("correction") or "",
                note=data.get("note") or "",
            )
        else:
            feedback_services.feedback_reject(
                principal=principal,
                user=request.user,
                feedback_id=feedback_id,
                note=data.get("note") or "",
            )
    except (StateConflict, WriteError) as exc:
        messages.error(request, str(exc))
        return redirect(target)
    messages.success(request, f"Feedback #{feedback_id}: {data['decision']}ed.")
    return redirect(target)
