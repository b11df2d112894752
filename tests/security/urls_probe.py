"""The real URLs plus one probe that runs raw, unfiltered SQL inside a request."""

from __future__ import annotations

from django.db import connection
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import principal_for_request
from config.urls import urlpatterns as real_urlpatterns

TABLES = ("memory_memory", "memory_session", "memory_entity", "recall_recallevent")


def _org_counts() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            # Deliberately no org filter: this is the bug RLS must contain.
            cursor.execute(f"SELECT org_id, count(*) FROM {table} GROUP BY org_id")
            out[table] = {str(org): n for org, n in cursor.fetchall()}
        cursor.execute("SELECT current_user")
        out["role"] = {cursor.fetchone()[0]: 1}
    return out


class Probe(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        if request.user is not None and request.user.is_authenticated:
            principal_for_request(request)
        return Response(_org_counts())


urlpatterns = [path("probe/raw", Probe.as_view()), *real_urlpatterns]
