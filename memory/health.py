"""Liveness and readiness probes."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up (no dependencies checked)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: database reachable, pgvector present, embedding model loaded."""
    from memory import embeddings

    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            row = cursor.fetchone()
        checks["database"] = "ok"
        checks["pgvector"] = f"ok ({row[0]})" if row else "missing"
    except Exception as exc:  # noqa: BLE001 - report any failure as not ready
        checks["database"] = f"error: {type(exc).__name__}"
        checks["pgvector"] = "unknown"
    try:
        embeddings.get_model()
        checks["embedder"] = "ok"
    except embeddings.EmbedderUnavailable as exc:
        checks["embedder"] = f"unavailable: {exc}"
    ready = all(v.startswith("ok") for v in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )
