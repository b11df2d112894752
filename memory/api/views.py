"""REST views for sessions and memories: parse, call one service, render."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.audit import audit_record
from accounts.authentication import principal_for_request
from memory import services
from memory.api import serializers as s
from memory.api.idempotency import idempotent
from memory.api.pagination import Cursor
from memory.models import Memory, Session, Status
from memory.services import MemoryInput, WriteError


def parse_items(raw: Any, serializer: type[Any], prefix: str) -> list[MemoryInput]:
    """Validate each item of a batch; the failing field is named ``prefix[i].field``."""
    if not isinstance(raw, list) or not raw:
        raise WriteError("a non-empty list is required", field=prefix)
    if len(raw) > settings.MNEMO_MAX_BATCH:
        raise WriteError(
            f"{len(raw)} items; the batch limit is {settings.MNEMO_MAX_BATCH}",
            field=prefix,
        )
    # One list serializer: a serializer per item deep-copied its fields each time
    # (~0.5 ms an item; docs/benchmarks.md, session 6).
    ser = serializer(data=raw, many=True)
    if not ser.is_valid():
        errors = ser.errors  # by item index (a dict in DRF 3.15+, a list before)
        pairs = errors.items() if isinstance(errors, dict) else enumerate(errors)
        for i, item_errors in sorted(
            (p for p in pairs if isinstance(p[0], int) and p[1]), key=lambda p: p[0]
        ):
            name, field_errors = next(iter(item_errors.items()))
            message = (
                field_errors[0] if isinstance(field_errors, list) else field_errors
            )
            if isinstance(message, dict):
                message = next(iter(message.values()))
            raise WriteError(str(message), field=f"{prefix}[{i}].{name}")
        raise WriteError(str(errors), field=prefix)
    return [serializer.input_from(d) for d in ser.validated_data]


def write_result(result: services.RememberResult, status: int = 201) -> Response:
    return Response(
        {
            "items": s.MemoryOut(result.memories, many=True).data,
            "pending": result.pending,
            "duplicates": result.duplicates,
            "replayed": result.replayed,
        },
        status=status,
    )


class SessionListCreate(APIView):
    pagination_class = Cursor  # documents the GET page shape in the schema

    @extend_schema(
        request=s.SessionIn,
        responses={201: s.SessionOut},
        operation_id="sessions_create",
    )
    @idempotent
    def post(self, request: Request) -> Response:
        ser = s.SessionIn(data=request.data)
        ser.is_valid(raise_exception=True)
        session = services.session_create(
            principal=principal_for_request(request), **ser.validated_data
        )
        return Response(s.SessionOut(session).data, status=201)

    @extend_schema(
        responses={200: s.SessionOut(many=True)},
        parameters=[OpenApiParameter("external_id", str)],
        operation_id="sessions_list",
    )
    def get(self, request: Request) -> Response:
        qs = Session.objects.visible_to(principal_for_request(request))
        if ext := request.query_params.get("external_id"):
            qs = qs.filter(external_id=ext)
        paginator = Cursor()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(s.SessionOut(page, many=True).data)


class SessionDetail(APIView):
    @extend_schema(responses={200: s.SessionOut}, operation_id="sessions_retrieve")
    def get(self, request: Request, session_id: int) -> Response:
        session = services.access_session(principal_for_request(request), session_id)
        return Response(s.SessionOut(session).data)


class SessionMessages(APIView):
    pagination_class = Cursor

    @extend_schema(
        request=s.MessagesIn,
        responses={201: s.WriteResultOut},
        operation_id="messages_create",
    )
    @idempotent
    def post(self, request: Request, session_id: int) -> Response:
        principal = principal_for_request(request)
        session = services.access_session(principal, session_id)
        data = request.data if isinstance(request.data, dict) else {}
        items = parse_items(data.get("messages"), s.MessageIn, "messages")
        result = services.memory_remember(
            principal=principal, items=items, session=session, field_prefix="messages"
        )
        return write_result(result)

    @extend_schema(
        responses={200: s.MemoryOut(many=True)}, operation_id="messages_list"
    )
    def get(self, request: Request, session_id: int) -> Response:
        principal = principal_for_request(request)
        session = services.access_session(principal, session_id)
        qs = (
            Memory.objects.visible_to(principal)
            .filter(session=session)
            .order_by("seq", "id")
        )
        paginator = Cursor()
        paginator.ordering = "seq"
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(s.MemoryOut(page, many=True).data)


MEMORY_FILTERS = [
    OpenApiParameter("tier", str),
    OpenApiParameter("kind", str),
    OpenApiParameter("session", int),
    OpenApiParameter("entity", str, description="entity id or name"),
    OpenApiParameter("occurred_after", OpenApiTypes.DATETIME),
    OpenApiParameter("occurred_before", OpenApiTypes.DATETIME),
    OpenApiParameter(
        "status", str, description="active (default), superseded, retracted, any"
    ),
    OpenApiParameter("q", str, description="full-text filter"),
]


class MemoryFilters(serializers.Serializer):
    tier = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    session = serializers.IntegerField(required=False, min_value=1)
    entity = serializers.CharField(required=False, max_length=200)
    occurred_after = serializers.DateTimeField(required=False)
    occurred_before = serializers.DateTimeField(required=False)
    status = serializers.ChoiceField(
        choices=[*Status.values, "any"], default=Status.ACTIVE
    )
    q = serializers.CharField(required=False, max_length=2000)


def filter_memories(qs: Any, f: dict[str, Any]) -> Any:
    if tier := f.get("tier"):
        qs = qs.filter(tier__in=tier.split(","))
    if kind := f.get("kind"):
        qs = qs.filter(kind__in=kind.split(","))
    if session := f.get("session"):
        qs = qs.filter(session_id=session)
    if entity := f.get("entity"):
        cond = Q(mentions__entity__normalized_name=entity.lower())
        if entity.isdigit():
            cond |= Q(mentions__entity_id=int(entity))
        qs = qs.filter(cond).distinct()
    if after := f.get("occurred_after"):
        qs = qs.filter(occurred_at__gte=after)
    if before := f.get("occurred_before"):
        qs = qs.filter(occurred_at__lt=before)
    if f.get("status", Status.ACTIVE) != "any":
        qs = qs.filter(status=f.get("status", Status.ACTIVE))
    if q := f.get("q"):
        from django.contrib.postgres.search import SearchQuery

        qs = qs.filter(search=SearchQuery(q, config="english", search_type="websearch"))
    return qs


class MemoryListCreate(APIView):
    pagination_class = Cursor

    @extend_schema(
        request=s.MemoriesIn,
        responses={201: s.WriteResultOut},
        operation_id="memories_create",
    )
    @idempotent
    def post(self, request: Request) -> Response:
        principal = principal_for_request(request)
        data = request.data if isinstance(request.data, dict) else {}
        raw: Any = data.get("memories")
        items = parse_items(raw, s.MemoryIn, "memories")
        session_ids = {item.get("session_id") for item in raw if isinstance(item, dict)}
        if len(session_ids - {None}) > 1:
            raise WriteError(
                "one batch writes into at most one session", field="memories"
            )
        session = None
        if sid := next(iter(session_ids - {None}), None):
            session = services.access_session(principal, sid)
        result = services.memory_remember(
            principal=principal, items=items, session=session
        )
        return write_result(result)

    @extend_schema(
        parameters=MEMORY_FILTERS,
        responses={200: s.MemoryOut(many=True)},
        operation_id="memories_list",
    )
    def get(self, request: Request) -> Response:
        principal = principal_for_request(request)
        f = MemoryFilters(data=request.query_params)
        f.is_valid(raise_exception=True)
        qs = filter_memories(Memory.objects.visible_to(principal), f.validated_data)
        paginator = Cursor()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(s.MemoryOut(page, many=True).data)


class MemoryDetail(APIView):
    @extend_schema(responses={200: s.MemoryOut}, operation_id="memories_retrieve")
    def get(self, request: Request, memory_id: int) -> Response:
        memory = services.access_memory(principal_for_request(request), memory_id)
        return Response(s.MemoryOut(memory).data)


class MemorySupersede(APIView):
    @extend_schema(
        request=s.SupersedeIn,
        responses={201: s.MemoryOut},
        operation_id="memories_supersede",
    )
    @idempotent
    def post(self, request: Request, memory_id: int) -> Response:
        ser = s.SupersedeIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        principal = principal_for_request(request)
        old = services.access_memory(principal, memory_id)
        correction = MemoryInput(
            content=d["content"],
            tier=old.tier,
            kind=old.kind,
            valid_from=d.get("valid_from"),
            valid_to=d.get("valid_to"),
            occurred_at=d.get("occurred_at"),
            metadata=d.get("metadata", {}),
        )
        new = services.memory_supersede(
            principal=principal,
            memory_id=memory_id,
            correction=correction,
            reason=d.get("reason", ""),
        )
        audit_record(
            org_id=principal.org_id,
            action="memory.supersede",
            principal=principal,
            target=old,
            before={"status": old.status, "content_sha256": old.content_sha256},
            after={"superseded_by": new.pk, "content_sha256": new.content_sha256},
            note=d.get("reason", ""),
            request=request,
        )
        return Response(s.MemoryOut(new).data, status=201)


class MemoryRetract(APIView):
    @extend_schema(
        request=s.RetractIn,
        responses={200: s.MemoryOut},
        operation_id="memories_retract",
    )
    @idempotent
    def post(self, request: Request, memory_id: int) -> Response:
        ser = s.RetractIn(data=request.data)
        ser.is_valid(raise_exception=True)
        principal = principal_for_request(request)
        memory = services.memory_retract(
            principal=principal,
            memory_id=memory_id,
            reason=ser.validated_data.get("reason", ""),
        )
        audit_record(
            org_id=principal.org_id,
            action="memory.retract",
            principal=principal,
            target=memory,
            before={"status": "active"},
            after={"status": memory.status},
            note=ser.validated_data.get("reason", ""),
            request=request,
        )
        return Response(s.MemoryOut(memory).data)
