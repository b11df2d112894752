"""REST: a session's working memory (``GET``/``PUT /api/v1/sessions/{id}/state``)."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import principal_for_request
from accounts.principals import Principal
from memory.api.errors import error_response
from memory.services import access_session
from recall.models import WorkingState

MAX_STATE_BYTES = 16 * 1024


class WorkingStateIn(serializers.Serializer):  # type: ignore[type-arg]
    state = serializers.DictField(help_text="Replaces the whole state (JSON object).")

    def validate_state(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value).encode()) > MAX_STATE_BYTES:
            raise serializers.ValidationError(f"state is over {MAX_STATE_BYTES} bytes")
        return value


class WorkingStateOut(serializers.Serializer):  # type: ignore[type-arg]
    session = serializers.IntegerField()
    state = serializers.DictField()
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField()


def working_state_get(principal: Principal, session_id: int) -> dict[str, Any]:
    """The session's state ({} when none) if the principal may see the session."""
    session = access_session(principal, session_id)
    row = WorkingState.objects.filter(session=session).first()
    return {
        "session": session.pk,
        "state": row.state if row else {},
        "updated_at": row.updated_at if row else None,
        "updated_by": row.updated_by if row else "",
    }


def working_state_put(
    *, principal: Principal, session_id: int, state: dict[str, Any]
) -> dict[str, Any]:
    """Replace the session's working state (a writer who may see the session)."""
    with transaction.atomic():
        session = access_session(principal, session_id, for_update=True)
        WorkingState.objects.update_or_create(
            session=session,
            defaults={
                "org_id": session.org_id,
                "state": state,
                "updated_by": principal.label,
                "updated_at": timezone.now(),
            },
        )
    return working_state_get(principal, session_id)


class WorkingStateView(APIView):
    @extend_schema(responses={200: WorkingStateOut}, operation_id="sessions_state_get")
    def get(self, request: Request, session_id: int) -> Response:
        principal = principal_for_request(request)
        return Response(WorkingStateOut(working_state_get(principal, session_id)).data)

    @extend_schema(
        request=WorkingStateIn,
        responses={200: WorkingStateOut},
        operation_id="sessions_state_put",
    )
    def put(self, request: Request, session_id: int) -> Response:
        principal = principal_for_request(request)
        if not principal.can_write:
            return error_response("this principal may not write", status_code=403)
        ser = WorkingStateIn(data=request.data)
        ser.is_valid(raise_exception=True)
        out = working_state_put(
            principal=principal,
            session_id=session_id,
            state=ser.validated_data["state"],
        )
        return Response(WorkingStateOut(out).data)
