"""Request-size limit: a body larger than ``MNEMO_MAX_BODY_BYTES`` is refused with 413.

Checked from ``Content-Length`` before anything reads the body, for every path. The
other limits (batch size, content size, query length, ``limit``, ``budget_tokens``,
trace depth and node count, page size) are validated where each input is parsed and
answered with 400; docs/security.md lists them all.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = int(settings.MNEMO_MAX_BODY_BYTES)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"error": "invalid Content-Length"}, status=400)
        if "\x00" in request.GET.urlencode() or "%00" in request.META.get(
            "QUERY_STRING", ""
        ):
            return JsonResponse(
                {
                    "error": "the NUL character is not allowed in the query string",
                    "field": "query",
                },
                status=400,
            )
        if limit and length > limit:
            return JsonResponse(
                {
                    "error": f"request body is {length} bytes; the limit is {limit}",
                    "field": "body",
                },
                status=413,
            )
        return self.get_response(request)
