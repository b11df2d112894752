"""Home redirect and the organization switcher."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.models import Membership
from ui.views.base import operator_view


@operator_view
def home(request: HttpRequest) -> HttpResponse:
    return redirect("ui:memory_list")


@require_POST
@operator_view
def switch_org(request: HttpRequest) -> HttpResponse:
    """Make another of the user's organizations the active one (members only)."""
    raw = request.POST.get("org", "")
    org_id = int(raw) if raw.isdigit() else None
    membership = Membership.objects.filter(
        user_id=request.user.pk, org_id=org_id
    ).first()
    if membership is None:
        messages.error(request, "You are not a member of that organization.")
    else:
        request.session["mnemo_org_id"] = membership.org_id
        messages.success(request, f"Now working in {membership.org.name}.")
    nxt = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        return redirect(nxt)
    return redirect("ui:memory_list")
