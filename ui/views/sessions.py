"""Session list and session timeline (polls while embedding is pending)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ui import selectors
from ui.forms import SessionFilterForm
from ui.views.base import operator_view, paginate, principal_of, render_page


@require_GET
@operator_view
def session_list(request: HttpRequest) -> HttpResponse:
    form = SessionFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    page = paginate(request, selectors.session_list(principal_of(request), filters))
    return render_page(
        request, "ui/session_list.html", {"form": form, "page": page}, partial="results"
    )


@require_GET
@operator_view
def session_detail(request: HttpRequest, session_id: int) -> HttpResponse:
    """The timeline; htmx polls the ``timeline`` region only while rows are pending."""
    timeline = selectors.session_timeline(principal_of(request), session_id)
    return render_page(
        request, "ui/session_detail.html", {"t": timeline}, partial="timeline"
    )
