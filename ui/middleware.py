"""Security headers for the operator console.

The console ships no inline script or style (htmx is loaded from ``/static/``, its
indicator styles are switched off in ``base.html``), so the policy can forbid inline
code outright: a stored ``<script>`` that somehow escaped autoescaping would still not
run.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

# Swagger UI (CDN + inline bootstrap) and the Django admin have their own needs.
EXEMPT_PREFIXES = ("/api/", "/admin/")

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Add a strict Content-Security-Policy to console HTML responses without one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if (
            "Content-Security-Policy" not in response
            and content_type.startswith("text/html")
            and not request.path.startswith(EXEMPT_PREFIXES)
        ):
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response
