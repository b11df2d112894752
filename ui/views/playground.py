"""Recall playground (org admins): run a query as any principal, explain, feedback."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from accounts.audit import audit_record
from memory.services import WriteError
from recall.feedback import feedback_submit
from recall.types import RecallUnavailable
from ui import playground
from ui.views.base import operator_view, principal_of, refusal, render_page

ADMINS_ONLY = "The recall playground is for organization admins."


@require_http_methods(["GET", "POST"])
@operator_view
def playground_page(request: HttpRequest) -> HttpResponse:
    """GET shows the form; POST runs the recall (a stored, audited event)."""
    admin = principal_of(request)
    if not admin.is_org_admin:
        return refusal(request, 403, ADMINS_ONLY)
    if request.method == "GET":
        form = playground.PlaygroundForm(admin=admin)
        return render_page(request, "ui/playground.html", {"form": form})
    form = playground.PlaygroundForm(request.POST, admin=admin)
    context: dict[str, object] = {"form": form}
    status = 200
    if form.is_valid():
        target = playground.resolve_principal(admin, form.cleaned_data["as_principal"])
        if target.label != admin.label:
            audit_record(
                org_id=admin.org_id,
                action="playground.impersonate",
                principal=admin,
                user=request.user,
                target_type="principal",
                target_id=target.label,
                after={"query": form.cleaned_data.get("query", "")[:500]},
                request=request,
            )
        try:
            pack = playground.playground_run(
                admin=admin,
                user=request.user,
                as_principal=target,
                request=form.to_request(),
            )
            context["result"] = playground.present(pack, target.label)
        except RecallUnavailable as exc:
            context["unavailable"] = exc.degradation.as_dict()
            status = 503
    else:
        status = 400
    return render_page(
        request, "ui/playground.html", context, partial="result", status=status
    )


@require_POST
@operator_view
def playground_feedback(request: HttpRequest) -> HttpResponse:
    """Feedback on a playground recall, by the admin; it lands in the review queue."""
    admin = principal_of(request)
    if not admin.is_org_admin:
        return refusal(request, 403, ADMINS_ONLY)
    form = playground.PlaygroundFeedbackForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, " ".join(str(m) for e in form.errors.values() for m in e)
        )
        return redirect("ui:playground")
    d = form.cleaned_data
    try:
        fb = feedback_submit(
            principal=admin,
            recall_id=d["recall_id"],
            verdict=d["verdict"],
            memory_id=d.get("memory_id"),
            comment=d.get("comment") or "",
            expected_memory_id=d.get("expected_memory_id"),
        )
    except WriteError as exc:
        messages.error(request, f"{exc.field}: {exc.message}")
        return redirect("ui:playground")
    messages.success(
        request, f"Feedback #{fb.pk} ({fb.verdict}) recorded for recall #{fb.event_id}."
    )
    return redirect("/feedback/?status=new")
