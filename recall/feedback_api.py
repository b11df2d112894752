"""REST for the feedback loop: verdicts and outcomes on a recall, test-set export."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import principal_for_request
from accounts.models import Organization
from memory.services import Forbidden
from recall import feedback as services
from recall.feedback_set import export_feedback_set
from recall.models import Feedback, Verdict


class FeedbackIn(serializers.Serializer):  # type: ignore[type-arg]
    verdict = serializers.ChoiceField(Verdict.values)
    memory_id = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="One item of the recall; omit for feedback on the whole recall.",
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=4000, default=""
    )
    expected_memory_id = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="For 'missing': the row that should have come (must be visible).",
    )


class FeedbackOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    recall_id = serializers.IntegerField(source="event_id")

    class Meta:
        model = Feedback
        fields = [
            "id",
            "recall_id",
            "memory_id",
            "verdict",
            "comment",
            "expected_memory_id",
            "author",
            "review_status",
            "created_at",
        ]


class FeedbackView(APIView):
    @extend_schema(
        request=FeedbackIn, responses={201: FeedbackOut}, operation_id="recall_feedback"
    )
    def post(self, request: Request, recall_id: int) -> Response:
        principal = principal_for_request(request)
        services.access_recall(principal, recall_id)  # 404 before validation
        ser = FeedbackIn(data=request.data)
        ser.is_valid(raise_exception=True)
        feedback = services.feedback_submit(
            principal=principal, recall_id=recall_id, **ser.validated_data
        )
        return Response(FeedbackOut(feedback).data, status=status.HTTP_201_CREATED)


class OutcomeIn(serializers.Serializer):  # type: ignore[type-arg]
    answer = serializers.CharField(max_length=16000)
    outcome = serializers.ChoiceField(services.OUTCOMES)
    note = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, default=""
    )


class OutcomeOut(serializers.Serializer):  # type: ignore[type-arg]
    memory_id = serializers.IntegerField()
    recall_id = serializers.IntegerField()
    outcome = serializers.CharField()
    derived_from = serializers.ListField(child=serializers.IntegerField())


class OutcomeView(APIView):
    @extend_schema(
        request=OutcomeIn, responses={201: OutcomeOut}, operation_id="recall_outcome"
    )
    def post(self, request: Request, recall_id: int) -> Response:
        principal = principal_for_request(request)
        services.access_recall(principal, recall_id)
        ser = OutcomeIn(data=request.data)
        ser.is_valid(raise_exception=True)
        episode = services.outcome_record(
            principal=principal, recall_id=recall_id, **ser.validated_data
        )
        body: dict[str, Any] = {
            "memory_id": episode.pk,
            "recall_id": recall_id,
            "outcome": ser.validated_data["outcome"],
            "derived_from": sorted(episode.derived_from.values_list("id", flat=True)),
        }
        return Response(OutcomeOut(body).data, status=status.HTTP_201_CREATED)


class FeedbackExportView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT}, operation_id="feedback_export")
    def get(self, request: Request) -> Response:
        """Accepted feedback of the caller's org as a replayable test set (admins)."""
        principal = principal_for_request(request)
        if not principal.is_org_admin or principal.org_id is None:
            raise Forbidden("exporting feedback is for organization admins")
        org = Organization.objects.get(pk=principal.org_id)
        response = Response(export_feedback_set(org))
        response["Content-Disposition"] = (
            f'attachment; filename="feedback-{org.slug}.json"'
        )
        return response
