"""REST views for conflicts: list, detail, resolve (parse, call one service, render).

Only the alternatives the caller may read are shown. Another org's conflict, a missing
id and a conflict none of whose alternatives the caller may see are the same 404; a
read-only principal (viewer role, read-only key) gets 403 when resolving.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import principal_for_request
from accounts.principals import Principal
from memory import conflict_resolution as conflicts
from memory.api.pagination import Cursor as BaseCursor
from memory.models import Conflict, ConflictKind, ConflictStatus


class AlternativeOut(serializers.Serializer):
    memory_id = serializers.IntegerField()
    content = serializers.CharField(source="memory.content")
    status = serializers.CharField(source="memory.status")
    valid_from = serializers.DateTimeField(source="memory.valid_from", allow_null=True)
    valid_to = serializers.DateTimeField(source="memory.valid_to", allow_null=True)
    recorded_at = serializers.DateTimeField(source="memory.recorded_at")
    superseded_at = serializers.DateTimeField(
        source="memory.superseded_at", allow_null=True
    )
    quote = serializers.CharField()
    supporters = serializers.JSONField()
    relationship_id = serializers.IntegerField(allow_null=True)


class EventOut(serializers.Serializer):
    action = serializers.CharField()
    actor = serializers.CharField()
    note = serializers.CharField()
    data = serializers.JSONField()
    at = serializers.DateTimeField()


class ConflictOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    subject = serializers.SerializerMethodField()
    predicate = serializers.CharField()
    summary = serializers.CharField()
    resolution = serializers.JSONField(allow_null=True)
    chosen_id = serializers.IntegerField(allow_null=True)
    note = serializers.CharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    alternatives = serializers.SerializerMethodField()
    events = EventOut(many=True, source="events.all")

    def get_subject(self, obj: Conflict) -> dict[str, Any] | None:
        s = obj.subject
        if s is None:
            return None
        return {"id": s.pk, "name": s.name, "unstable": s.unstable}

    def get_alternatives(self, obj: Conflict) -> list[dict[str, Any]]:
        principal: Principal = self.context["principal"]
        alts = conflicts.visible_alternatives(principal, obj)
        return list(AlternativeOut(alts, many=True).data)


class BoundIn(serializers.Serializer):
    memory_id = serializers.IntegerField(min_value=1)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_to = serializers.DateTimeField(required=False, allow_null=True)


class ResolveIn(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(conflicts.Action.ALL))
    chosen = serializers.IntegerField(required=False, min_value=1)
    bounds = BoundIn(many=True, required=False)
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class Cursor(BaseCursor):
    max_page_size = 200


class ConflictFilters(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[*ConflictStatus.values, "any"], default=ConflictStatus.OPEN
    )
    kind = serializers.ChoiceField(choices=ConflictKind.values, required=False)
    entity = serializers.IntegerField(required=False, min_value=1)


class ConflictList(APIView):
    pagination_class = Cursor  # documents the page shape in the schema

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status", str, description="open (default), resolved, dismissed, any"
            ),
            OpenApiParameter("kind", str),
            OpenApiParameter("entity", int),
        ],
        responses={200: ConflictOut(many=True)},
        operation_id="conflicts_list",
    )
    def get(self, request: Request) -> Response:
        principal = principal_for_request(request)
        f = ConflictFilters(data=request.query_params)
        f.is_valid(raise_exception=True)
        qs = Conflict.objects.filter(
            pk__in=Conflict.objects.visible_to(principal).values("pk")
        ).select_related("subject")
        if f.validated_data["status"] != "any":
            qs = qs.filter(status=f.validated_data["status"])
        if kind := f.validated_data.get("kind"):
            qs = qs.filter(kind=kind)
        if entity := f.validated_data.get("entity"):
            qs = qs.filter(subject_id=entity)
        paginator = Cursor()
        page = paginator.paginate_queryset(qs, request, view=self)
        data = ConflictOut(page, many=True, context={"principal": principal}).data
        return paginator.get_paginated_response(data)


class ConflictDetail(APIView):
    @extend_schema(responses={200: ConflictOut}, operation_id="conflicts_retrieve")
    def get(self, request: Request, conflict_id: int) -> Response:
        principal = principal_for_request(request)
        conflict = conflicts.access_conflict(principal, conflict_id)
        return Response(ConflictOut(conflict, context={"principal": principal}).data)


class ConflictResolve(APIView):
    @extend_schema(
        request=ResolveIn,
        responses={200: ConflictOut},
        operation_id="conflicts_resolve",
    )
    def post(self, request: Request, conflict_id: int) -> Response:
        principal = principal_for_request(request)
        # Visibility first: a conflict the caller cannot see is a 404 before any 400.
        conflicts.access_conflict(principal, conflict_id)
        ser = ResolveIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        bounds = {
            b["memory_id"]: (b.get("valid_from"), b.get("valid_to"))
            for b in d.get("bounds", [])
        }
        conflict = conflicts.conflict_resolve(
            principal=principal,
            conflict_id=conflict_id,
            action=d["action"],
            chosen_id=d.get("chosen"),
            bounds=bounds or None,
            note=d.get("note", ""),
        )
        return Response(ConflictOut(conflict, context={"principal": principal}).data)
