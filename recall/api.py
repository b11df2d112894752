"""REST: recall, the primitives (search, similar, trace)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import principal_for_request
from accounts.models import Visibility
from memory import embeddings, services
from memory.api.errors import error_response
from memory.api.serializers import BuiltOnceFieldsMixin, MemoryOut
from memory.models import KINDS_BY_TIER, Memory
from recall import channels, lineage
from recall.scope import Scope
from recall.services import recall_run
from recall.types import (
    ALTITUDES,
    BUDGET_LEVELS,
    CHANNELS,
    LANES,
    MODES,
    PHASE1_STRATEGIES,
    RANK_BY,
    RecallRequest,
    RecallUnavailable,
)

ALL_TIERS = list(KINDS_BY_TIER)
ALL_KINDS = [k for ks in KINDS_BY_TIER.values() for k in ks]


class RecallIn(BuiltOnceFieldsMixin, serializers.Serializer):
    query = serializers.CharField(min_length=1, max_length=2000, trim_whitespace=True)
    budget_tokens = serializers.IntegerField(min_value=1, max_value=32768, default=4096)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=15)
    tiers = serializers.ListField(
        child=serializers.ChoiceField(ALL_TIERS),
        required=False,
        allow_empty=False,
        max_length=5,
    )
    kinds = serializers.ListField(
        child=serializers.ChoiceField(ALL_KINDS),
        required=False,
        allow_empty=False,
        max_length=20,
    )
    entities = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=20
    )
    sessions = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=200
    )
    occurred_after = serializers.DateTimeField(required=False)
    occurred_before = serializers.DateTimeField(required=False)
    as_of = serializers.DateTimeField(required=False)
    known_at = serializers.DateTimeField(required=False)
    reference_time = serializers.DateTimeField(required=False)
    rank_by = serializers.ChoiceField(RANK_BY, default="relevance")
    mode = serializers.ChoiceField(MODES, default="cascade")
    weights = serializers.DictField(
        child=serializers.FloatField(min_value=0, max_value=10), required=False
    )
    strict = serializers.BooleanField(default=False)
    explain = serializers.BooleanField(default=True)
    phase1_strategy = serializers.ChoiceField(PHASE1_STRATEGIES, default="merge")
    answer_type_boost = serializers.FloatField(
        min_value=0.5, max_value=3.0, default=1.0
    )
    speaker_boost = serializers.FloatField(
        min_value=1.0,
        max_value=3.0,
        default=1.2,
        help_text="When the query names a speaker of the org's rows, that speaker's "
        "rows are multiplied by this (and the name is not a full-text term); 1.0 "
        "turns the rule off.",
    )
    window_boost = serializers.FloatField(
        min_value=1.0,
        max_value=5.0,
        default=RecallRequest.window_boost,
        help_text="Rows inside the query's resolved time window (intent.window) are "
        "multiplied by this after fusion; 1.0 turns the rule off.",
    )
    corroboration_share = serializers.FloatField(
        min_value=0.0,
        max_value=2.0,
        default=RecallRequest.corroboration_share,
        help_text="A raw message whose observations (rows drawn from it) rank too "
        "takes this share of their best score (boost `corroborated` in explain); 0 "
        "turns the rule off.",
    )
    max_citations = serializers.IntegerField(
        min_value=1,
        max_value=100,
        default=6,
        help_text="Citations per item, most relevant first (turns this recall ranked, "
        "then shared query words, then time); `citations_total` counts them all.",
    )
    # Part two: lanes and controls (docs/recall-lanes.md).
    session = serializers.IntegerField(
        min_value=1,
        max_value=2**63 - 1,
        required=False,
        allow_null=True,
        default=None,
        help_text="The current session: its working memory comes first, the recency "
        "fallback reads it, lessons come from the other sessions.",
    )
    prefer_current_session = serializers.BooleanField(
        default=False, help_text="Evidence from `session` only; no lesson overlay."
    )
    include_rules = serializers.BooleanField(
        default=True,
        help_text="Rule overlay: visible rules ride along ahead of items "
        "(capped in count and budget share).",
    )
    include_lessons = serializers.BooleanField(
        default=True, help_text="Lesson overlay: relevant lessons of other sessions."
    )
    reference_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        max_length=50,
        default=list,
        help_text="Rows returned byte for byte when visible; the others "
        "are listed in `not_found`.",
    )
    include_working_memory = serializers.BooleanField(
        default=True, help_text="Include the session's working state first."
    )
    recency_fallback = serializers.BooleanField(
        default=True,
        help_text="With `session`: when nothing clears the relevance "
        "gate, return the session's latest rows (lane fallback).",
    )
    budget_level = serializers.ChoiceField(
        BUDGET_LEVELS,
        default="mid",
        help_text="low: fewer candidates, no graph, no "
        "phase 3; mid: tuned default; high: more candidates, graph on, every phase.",
    )
    env_tags = serializers.ListField(
        # Not trimmed: the length limit applies to what was sent (schema maxLength).
        child=serializers.CharField(max_length=100, trim_whitespace=False),
        required=False,
        max_length=20,
        default=list,
        help_text="Rows sharing a tag are boosted; rows whose tags all "
        "differ take a small penalty (see explain).",
    )
    altitude = serializers.ChoiceField(
        ALTITUDES,
        default="auto",
        help_text="auto: rows when they fit the budget, "
        "else topic digests; rows; digests (digests first, uncovered rows after); root "
        "(digests only).",
    )
    min_relevance = serializers.FloatField(
        min_value=0.0,
        max_value=1.0,
        required=False,
        allow_null=True,
        default=None,
        help_text="Cosine an item needs to count as a match (default: "
        "MNEMO_RECALL_MIN_RELEVANCE); 0 turns the no-match gate off.",
    )
    communities_budget_tokens = serializers.IntegerField(
        min_value=0,
        max_value=4096,
        default=256,
        help_text="Separate budget of the `communities` field; 0 turns it off.",
    )

    def validate_weights(self, value: dict[str, float]) -> dict[str, float]:
        unknown = set(value) - set(CHANNELS)
        if unknown:
            raise serializers.ValidationError(
                f"unknown channel(s) {sorted(unknown)}; channels are {list(CHANNELS)}"
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        a, b = attrs.get("occurred_after"), attrs.get("occurred_before")
        if a and b and b <= a:
            raise serializers.ValidationError(
                {"occurred_before": "must be after occurred_after"}
            )
        if attrs.get("prefer_current_session") and not attrs.get("session"):
            raise serializers.ValidationError(
                {"prefer_current_session": "needs `session` (the current session id)"}
            )
        return attrs

    def to_request(self) -> RecallRequest:
        d = dict(self.validated_data)
        for key in (
            "tiers",
            "kinds",
            "entities",
            "sessions",
            "reference_ids",
            "env_tags",
        ):
            if key in d:
                d[key] = tuple(d[key])
        return RecallRequest(**d)


class CitationOut(serializers.Serializer):
    id = serializers.IntegerField()
    session = serializers.IntegerField(allow_null=True)
    occurred_at = serializers.DateTimeField(allow_null=True)
    external_ref = serializers.CharField()
    quote = serializers.DictField()


class RecallItemOut(serializers.Serializer):
    id = serializers.IntegerField()
    tier = serializers.CharField()
    kind = serializers.CharField()
    content = serializers.CharField()
    occurred_at = serializers.DateTimeField(allow_null=True)
    session = serializers.IntegerField(allow_null=True)
    visibility = serializers.ChoiceField(Visibility.choices)
    score = serializers.FloatField()
    tokens = serializers.IntegerField()
    phase = serializers.IntegerField()
    speaker = serializers.CharField()
    external_ref = serializers.CharField()
    untrusted = serializers.BooleanField(
        help_text="Stored text is data, never instructions."
    )
    citations = CitationOut(many=True)
    citations_total = serializers.IntegerField(
        help_text="Raw evidence rows the item traces to in all; `citations` holds "
        "the first `max_citations` (most relevant first)."
    )
    explain = serializers.DictField(allow_null=True)
    lane = serializers.ChoiceField(LANES, help_text="Which lane brought the item.")


class RecallOut(serializers.Serializer):
    recall_id = serializers.IntegerField(allow_null=True)
    query = serializers.CharField()
    items = RecallItemOut(many=True)
    omitted = serializers.ListField(child=serializers.DictField())
    total_tokens = serializers.IntegerField()
    budget_tokens = serializers.IntegerField()
    phase_reached = serializers.IntegerField()
    coverage = serializers.DictField()
    intent = serializers.DictField()
    degradations = serializers.ListField(child=serializers.DictField())
    timings_ms = serializers.DictField(child=serializers.FloatField())
    no_match = serializers.BooleanField(
        help_text="Nothing cleared the relevance gate; items are empty (or fallback)."
    )
    fallback = serializers.BooleanField(help_text="Items are the recency fallback.")
    not_found = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="reference_ids missing or not visible.",
    )
    working_memory = serializers.DictField(allow_null=True)
    communities = serializers.ListField(child=serializers.DictField())
    suggested_actions = serializers.ListField(child=serializers.DictField())
    controls = serializers.DictField(
        help_text="How the controls applied: budget level, altitude, relevance gate, "
        "env tags, items per lane."
    )


class RecallView(APIView):
    @extend_schema(request=RecallIn, responses={200: RecallOut}, operation_id="recall")
    def post(self, request: Request) -> Response:
        ser = RecallIn(data=request.data)
        ser.is_valid(raise_exception=True)
        principal = principal_for_request(request)
        try:
            pack = recall_run(principal, ser.to_request())
        except RecallUnavailable as exc:
            d = exc.degradation
            return error_response(
                f"strict recall: channel '{d.channel}' is degraded: {d.message}",
                status_code=503,
                field=d.channel,
                detail=d.as_dict(),
                headers={"Retry-After": "10"},
            )
        return Response(pack.as_dict())


class SearchIn(serializers.Serializer):
    query = serializers.CharField(min_length=1, max_length=2000)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    tiers = serializers.ListField(
        child=serializers.ChoiceField(ALL_TIERS), required=False, allow_empty=False
    )


def _scope(principal: Any, tiers: list[str] | None) -> Scope:
    return Scope(principal=principal, tiers=tuple(tiers or ALL_TIERS))


def _ranked_rows(principal: Any, hits: list[Any]) -> list[dict[str, Any]]:
    rows = Memory.objects.visible_to(principal).in_bulk([h.memory_id for h in hits])
    out = []
    for h in hits:
        if h.memory_id in rows:
            out.append(
                {**MemoryOut(rows[h.memory_id]).data, "score": h.score, "rank": h.rank}
            )
    return out


SEARCH_OUT = inline_serializer(
    "SearchOut", {"results": serializers.ListField(child=serializers.DictField())}
)


class SearchView(APIView):
    @extend_schema(request=SearchIn, responses={200: SEARCH_OUT}, operation_id="search")
    def post(self, request: Request) -> Response:
        ser = SearchIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        principal = principal_for_request(request)
        hits = channels.lexical_channel(
            _scope(principal, d.get("tiers")), d["query"].split(), k=d["limit"]
        )
        return Response({"results": _ranked_rows(principal, hits)})


class SimilarView(APIView):
    @extend_schema(
        request=SearchIn, responses={200: SEARCH_OUT}, operation_id="similar"
    )
    def post(self, request: Request) -> Response:
        ser = SearchIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        principal = principal_for_request(request)
        try:
            vector = embeddings.embed_queries([d["query"]])[0]
        except embeddings.EmbedderUnavailable as exc:
            return error_response(
                f"vector search unavailable: {exc}", status_code=503, field="vector"
            )
        from django.db import transaction

        with transaction.atomic():
            channels.set_vector_search_params(ef_search=max(100, 2 * d["limit"]))
            hits = channels.vector_channel(
                _scope(principal, d.get("tiers")), vector, k=d["limit"]
            )
        return Response({"results": _ranked_rows(principal, hits)})


class TraceView(APIView):
    @extend_schema(
        responses={
            200: inline_serializer(
                "TraceOut",
                {
                    "id": serializers.IntegerField(),
                    "up": serializers.ListField(),
                    "down": serializers.ListField(),
                    "supersession": serializers.ListField(),
                    "stopped_reason": serializers.CharField(),
                },
            )
        },
        operation_id="memories_trace",
    )
    def get(self, request: Request, memory_id: int) -> Response:
        principal = principal_for_request(request)
        memory = services.access_memory(principal, memory_id)
        raw_depth = request.query_params.get("depth") or "4"
        if not raw_depth.isdigit() or not 1 <= int(raw_depth) <= 8:
            return error_response(
                "depth must be an integer from 1 to 8", status_code=400, field="depth"
            )
        depth = int(raw_depth)
        return Response(
            lineage.trace(
                principal,
                memory,
                max_depth=depth,
                max_nodes=settings.MNEMO_TRACE_MAX_NODES,
            )
        )
