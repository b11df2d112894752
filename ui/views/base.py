"""The one door every console view goes through: login, principal, refusal pages.

``operator_view`` resolves the request's :class:`~accounts.principals.Principal`
(the org comes from ``request.session["mnemo_org_id"]``) and turns the access
exceptions into the same pages everywhere: no membership -> 403, missing or not
yours -> 404 (never a hint which), read-only role trying to write -> 403.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.authentication import principal_for_request
from accounts.principals import NoAccess, Principal
from memory.services import Forbidden, NotFound
from ui import selectors

ViewFunc = Callable[..., HttpResponse]


def refusal(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """The shared 403/404 page (it never says whether a missing object exists)."""
    titles = {403: "Not allowed", 404: "Not found"}
    return render(
        request,
        "ui/error.html",
        {"title": titles.get(status, "Error"), "message": message, "status": status},
        status=status,
    )


def operator_view(view: ViewFunc) -> ViewFunc:
    """Require login and a membership; map access errors to refusal pages."""

    @login_required
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            principal = principal_for_request(request)
        except NoAccess:
            request.session.pop("mnemo_org_id", None)
            return refusal(
                request, 403, "Your account is not a member of any organization."
            )
        request.principal = principal  # type: ignore[attr-defined]
        try:
            return view(request, *args, **kwargs)
        except NotFound:
            return refusal(request, 404, "There is nothing here you can see.")
        except Forbidden:
            return refusal(request, 403, "Your role in this organization is read-only.")

    return wrapper


def require_writer(principal: Principal) -> None:
    """Raise ``Forbidden`` for viewers (and read-only principals)."""
    if not principal.can_write:
        raise Forbidden("read-only role")


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render a page, or only its ``partial`` region for an htmx request.

    Full pages get the navigation context (org switcher, queue counts).
    """
    principal = principal_of(request)
    htmx = getattr(request, "htmx", None)
    if partial and htmx and not htmx.boosted:
        return render(request, f"{template}#{partial}", context, status=status)
    context = {**context, "nav": selectors.nav_context(principal, request.user)}
    return render(request, template, context, status=status)


def paginate(request: HttpRequest, items: Any, per_page: int = 25) -> Page:
    """The requested page of ``items`` (bad numbers give the nearest page)."""
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def principal_of(request: HttpRequest) -> Principal:
    """The principal ``operator_view`` attached to the request."""
    return request.principal  # type: ignore[attr-defined,no-any-return]
