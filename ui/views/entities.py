"""Entity list and entity page with a server-drawn relationship graph."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from ui import selectors
from ui.forms import EntityFilterForm
from ui.graph import Neighbour, radial_layout
from ui.views.base import operator_view, paginate, principal_of, render_page


@require_GET
@operator_view
def entity_list(request: HttpRequest) -> HttpResponse:
    form = EntityFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    page = paginate(request, selectors.entity_list(principal_of(request), filters), 50)
    return render_page(
        request, "ui/entity_list.html", {"form": form, "page": page}, partial="results"
    )


@require_GET
@operator_view
def entity_detail(request: HttpRequest, entity_id: int) -> HttpResponse:
    page = selectors.entity_page(principal_of(request), entity_id)
    return render_page(
        request, "ui/entity_detail.html", {"p": page, "graph": _graph(page)}
    )


def _graph(page: selectors.EntityPage) -> object:
    """Relationships as solid edges; co-mentions (no stated relation) dashed."""
    me = page.entity
    neighbours: list[Neighbour] = []
    for rel in page.relationships:
        outgoing = rel.subject_id == me.pk
        other = rel.object_entity if outgoing else rel.subject
        if other is not None:
            key, label = f"e{other.pk}", other.name
            href = reverse("ui:entity_detail", args=[other.pk])
        else:
            key, label, href = f"lit{rel.pk}", rel.object_literal, ""
        predicate = rel.predicate if outgoing else f"← {rel.predicate}"
        neighbours.append(Neighbour(key, label, predicate, href, outgoing))
    related = {n.key for n in neighbours}
    for other, n in page.co_mentioned:
        if f"e{other.pk}" in related:
            continue
        href = reverse("ui:entity_detail", args=[other.pk])
        neighbours.append(
            Neighbour(f"e{other.pk}", other.name, f"together ×{n}", href, dashed=True)
        )
    return radial_layout(me.name, neighbours)
