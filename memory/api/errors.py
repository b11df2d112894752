"""One error shape for the whole API.

``{"error": message, "field": name, "detail": ...}``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from accounts.principals import NoAccess
from memory.services import Forbidden, NotFound, StateConflict, WriteError


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "A required service is unavailable."
    default_code = "unavailable"


def _first_field(detail: Any, prefix: str = "") -> tuple[str, str]:
    """The first (field path, message) in a DRF error detail tree."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = (
                key
                if not prefix
                else (
                    f"{prefix}.{key}" if not str(key).isdigit() else f"{prefix}[{key}]"
                )
            )
            if value:
                return _first_field(value, name)
    if isinstance(detail, list):
        for i, value in enumerate(detail):
            if isinstance(value, dict | list):
                found = _first_field(value, f"{prefix}[{i}]" if prefix else str(i))
                if found[1]:
                    return found
            elif value:
                return prefix or "non_field_errors", str(value)
    if detail:
        return prefix or "non_field_errors", str(detail)
    return prefix or "non_field_errors", ""


def error_response(
    message: str,
    *,
    status_code: int,
    field: str | None = None,
    detail: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    if detail is not None:
        body["detail"] = detail
    return Response(body, status=status_code, headers=headers)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, WriteError):
        return error_response(
            f"{exc.field}: {exc.message}",
            status_code=exc.status,
            field=exc.field,
            detail={exc.field: [exc.message]},
        )
    if isinstance(exc, NotFound | Http404):
        return error_response(str(exc) or "not found", status_code=404)
    if isinstance(exc, Forbidden):
        return error_response(str(exc), status_code=403)
    if isinstance(exc, NoAccess):
        return error_response("not a member of this organization", status_code=403)
    if isinstance(exc, StateConflict):
        return error_response(str(exc), status_code=409)
    if isinstance(exc, OperationalError | InterfaceError | ImproperlyConfigured):
        return error_response(
            "the database is unavailable; retry shortly",
            status_code=503,
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, DatabaseError):
        return None
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_field(exc.detail)
        return error_response(
            f"{field}: {message}" if field != "non_field_errors" else message,
            status_code=400,
            field=field,
            detail=exc.detail,
        )
    response = drf_handler(exc, context)
    if (
        response is not None
        and isinstance(response.data, dict)
        and "detail" in response.data
    ):
        response.data = {"error": str(response.data["detail"])}
    return response


def page_not_found(request: Any, exception: Exception | None = None) -> Any:
    """``handler404``: JSON under ``/api/``, the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not found"}, status=404)
    return defaults.page_not_found(request, exception)  # type: ignore[arg-type]


def server_error(request: Any) -> Any:
    """``handler500``: JSON under ``/api/`` (never a trace), HTML elsewhere."""
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith("/api/"):
        return JsonResponse({"error": "internal error"}, status=500)
    return defaults.server_error(request)
