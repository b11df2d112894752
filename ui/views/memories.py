"""Memory explorer (filterable, searchable, paginated) and memory detail."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ui import selectors
from ui.forms import MemoryFilterForm
from ui.views.base import operator_view, paginate, principal_of, render_page


@require_GET
@operator_view
def memory_list(request: HttpRequest) -> HttpResponse:
    """Explorer: GET parameters are the filters, so every view of it is a bookmark."""
    form = MemoryFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    results = selectors.memory_search(principal_of(request), filters)
    page = paginate(request, results)
    return render_page(
        request,
        "ui/memory_list.html",
        {"form": form, "page": page, "searching": bool(filters.get("q"))},
        partial="results",
    )


@require_GET
@operator_view
def memory_detail(request: HttpRequest, memory_id: int) -> HttpResponse:
    detail = selectors.memory_detail(principal_of(request), memory_id)
    return render_page(request, "ui/memory_detail.html", {"d": detail})
