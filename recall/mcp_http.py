"""``/mcp``: MCP Streamable HTTP served by Django (runserver, gunicorn) alike.

The SDK's transport is an ASGI app. This view authenticates the Bearer API key the
way REST does (DRF ``ApiKeyAuthentication``), then hands the one HTTP request to a
fresh stateless, JSON-response ``StreamableHTTPSessionManager`` through
``async_to_sync`` and returns what it answered. Stateless mode needs no session
store, so any worker can serve any request. GET (a server-to-client SSE stream) is
not offered: 405, as the transport spec allows.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.authentication import ApiKeyAuthentication, principal_for_request
from recall.mcp_tools import current_principal, server

MAX_BODY_BYTES = 1024 * 1024


def _scope(request: Request) -> dict[str, Any]:
    django_request = request._request
    headers = [
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in django_request.headers.items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": django_request.method,
        "scheme": request.scheme,
        "path": django_request.path,
        "raw_path": django_request.path.encode(),
        "root_path": "",
        "query_string": django_request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (django_request.META.get("REMOTE_ADDR", ""), 0),
        "server": (django_request.get_host(), 0),
    }


async def _serve(scope: dict[str, Any], body: bytes) -> tuple[int, list[Any], bytes]:
    """Run one request through a fresh stateless manager; (status, headers, body)."""
    manager = StreamableHTTPSessionManager(
        app=server._lowlevel_server,  # noqa: SLF001
        json_response=True,
        stateless=True,
    )
    status, headers, chunks = 500, [], []
    done = anyio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


class McpView(APIView):
    """The MCP endpoint (tools recall, remember, search, get, trace, feedback)."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(exclude=True)
    def post(self, request: Request) -> HttpResponse:
        return self._forward(request)

    @extend_schema(exclude=True)
    def delete(self, request: Request) -> HttpResponse:
        return self._forward(request)

    @extend_schema(exclude=True)
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(status=405)
        response["Allow"] = "POST, DELETE"
        return response

    def _forward(self, request: Request) -> HttpResponse:
        principal = principal_for_request(request)
        body = request._request.body
        if len(body) > MAX_BODY_BYTES:
            return HttpResponse(status=413)
        token = current_principal.set(principal)
        try:
            status, headers, payload = async_to_sync(_serve)(_scope(request), body)
        finally:
            current_principal.reset(token)
        response = HttpResponse(payload, status=status)
        for key, value in headers:
            name = key.decode("latin-1")
            if name.lower() not in (
                "content-length",
                "transfer-encoding",
                "connection",
            ):
                response[name] = value.decode("latin-1")
        return response
