"""Recall playground: run ``recall_run`` as any principal of the org, audited.

Admins only (the view checks). The form carries every ``RecallRequest`` option except
``record_event``, which is always on: the run is stored as a ``RecallEvent`` under the
impersonated principal's label, with the admin who ran it in ``params["playground"]``,
so feedback given from the page refers to a real recall and the audit trail names both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Agent, Membership
from accounts.principals import NoAccess, Principal
from memory.models import ALL_KINDS, Tier
from memory.services import NotFound
from recall.models import RecallEvent, Verdict
from recall.pipeline.intent import VARIANT_STYLES
from recall.services import durable_commit, recall_run
from recall.types import (
    CHANNELS,
    MODES,
    PHASE1_STRATEGIES,
    RANK_BY,
    ContextPack,
    PackedMemory,
    RecallRequest,
)
from ui.graph import Bar, bar_chart

DEFAULTS = RecallRequest(query="")
CHART_LABEL_WIDTH = 130
CHART_BAR_WIDTH = 380
CHART_ROW = 26


def principal_choices(admin: Principal) -> list[tuple[str, str]]:
    """``("user:ID" | "agent:ID", label)`` for every member and active agent."""
    people = [
        (f"user:{m.user_id}", f"{m.user.get_username()} ({m.role})")
        for m in Membership.objects.filter(org_id=admin.org_id)
        .select_related("user")
        .order_by("user__username")
    ]
    agents = [
        (
            f"agent:{a.pk}",
            f"agent {a.name}" + (f" (team {a.team.name})" if a.team else ""),
        )
        for a in Agent.objects.filter(org_id=admin.org_id, is_active=True)
        .select_related("team")
        .order_by("name")
    ]
    return people + agents


def resolve_principal(admin: Principal, value: str) -> Principal:
    """The principal ``value`` names inside the admin's org; else ``NotFound``."""
    kind, _, raw_id = (value or "").partition(":")
    if not raw_id.isdigit():
        raise NotFound("principal not found")
    if kind == "agent":
        agent = Agent.objects.filter(
            pk=int(raw_id), org_id=admin.org_id, is_active=True
        ).first()
        if agent is not None:
            return Principal.for_agent(agent)
    elif kind == "user":
        user = get_user_model().objects.filter(pk=int(raw_id)).first()
        if user is not None:
            try:
                return Principal.for_user(user, org_id=admin.org_id)
            except NoAccess:
                pass
    raise NotFound("principal not found")


def _csv(value: str) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _dt(label: str) -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )


def _weight(name: str) -> forms.FloatField:
    return forms.FloatField(
        label=f"Weight: {name}",
        required=False,
        min_value=0,
        max_value=10,
        widget=forms.NumberInput(attrs={"step": "0.1", "placeholder": "default"}),
    )


class PlaygroundForm(forms.Form):
    """Every ``RecallRequest`` option; blank fields take the request's defaults."""

    as_principal = forms.CharField(label="Run as", max_length=40, widget=forms.Select)
    query = forms.CharField(label="Query", max_length=2000)
    budget_tokens = forms.IntegerField(
        label="Token budget", min_value=1, max_value=32768, required=False
    )
    limit = forms.IntegerField(
        label="Limit", min_value=1, max_value=100, required=False
    )
    tiers = forms.MultipleChoiceField(
        label="Tiers",
        required=False,
        choices=Tier.choices,
        widget=forms.CheckboxSelectMultiple,
    )
    kinds = forms.MultipleChoiceField(
        label="Kinds",
        required=False,
        choices=[(k, k) for k in ALL_KINDS],
        widget=forms.SelectMultiple(attrs={"size": 4}),
    )
    entities = forms.CharField(
        label="Entities (comma separated)", required=False, max_length=2000
    )
    sessions = forms.CharField(
        label="Session ids (comma separated)", required=False, max_length=2000
    )
    occurred_after = _dt("Occurred after")
    occurred_before = _dt("Occurred before")
    as_of = _dt("As of (world time)")
    known_at = _dt("Known at (system time)")
    reference_time = _dt("Reference time")
    rank_by = forms.ChoiceField(
        label="Rank by", choices=[(r, r) for r in RANK_BY], required=False
    )
    mode = forms.ChoiceField(
        label="Mode", choices=[(m, m) for m in MODES], required=False
    )
    phase1_strategy = forms.ChoiceField(
        label="Phase 1 strategy",
        choices=[(s, s) for s in PHASE1_STRATEGIES],
        required=False,
    )
    answer_type_boost = forms.FloatField(
        label="Answer type boost", min_value=0.5, max_value=3.0, required=False
    )
    neighbor_share = forms.FloatField(
        label="Neighbour share", min_value=0.0, max_value=1.0, required=False
    )
    corroboration_share = forms.FloatField(
        label="Corroboration share", min_value=0.0, max_value=2.0, required=False
    )
    max_citations = forms.IntegerField(
        label="Citations per item", min_value=1, max_value=100, required=False
    )
    window_boost = forms.FloatField(
        label="Time-window boost", min_value=1.0, max_value=5.0, required=False
    )
    variant_styles = forms.MultipleChoiceField(
        label="Query variants",
        required=False,
        choices=[(s, s) for s in VARIANT_STYLES],
        widget=forms.CheckboxSelectMultiple,
    )
    strict = forms.BooleanField(label="Strict (fail on degradation)", required=False)
    explain = forms.BooleanField(label="Explain", required=False, initial=True)
    weight_vector = _weight("vector")
    weight_lexical = _weight("lexical")
    weight_temporal = _weight("temporal")
    weight_graph = _weight("graph")
    weight_recency = _weight("recency")

    GROUPS = (
        (
            "budget_tokens",
            "limit",
            "rank_by",
            "mode",
            "phase1_strategy",
            "answer_type_boost",
            "neighbor_share",
            "corroboration_share",
            "max_citations",
            "window_boost",
        ),
        tuple(f"weight_{c}" for c in CHANNELS),
        ("entities", "sessions", "kinds"),
        ("occurred_after", "occurred_before", "as_of", "known_at", "reference_time"),
    )

    def __init__(self, *args: Any, admin: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["as_principal"].widget.choices = principal_choices(admin)

    def option_groups(self) -> list[list[forms.BoundField]]:
        """The request options in display rows (the template loops, never filters)."""
        return [[self[name] for name in group] for group in self.GROUPS]

    def clean_sessions(self) -> list[int]:
        values = _csv(self.cleaned_data.get("sessions") or "")
        if not all(v.isdigit() for v in values):
            raise forms.ValidationError("Session ids are numbers, comma separated.")
        return [int(v) for v in values]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        a, b = data.get("occurred_after"), data.get("occurred_before")
        if a and b and b <= a:
            self.add_error("occurred_before", "Must be after 'occurred after'.")
        return data

    def to_request(self) -> RecallRequest:
        d = self.cleaned_data

        def pick(name: str) -> Any:
            value = d.get(name)
            return getattr(DEFAULTS, name) if value in (None, "") else value

        weights = {
            c: float(d[f"weight_{c}"])
            for c in CHANNELS
            if d.get(f"weight_{c}") is not None
        }
        return RecallRequest(
            query=d["query"],
            budget_tokens=pick("budget_tokens"),
            limit=pick("limit"),
            tiers=tuple(d["tiers"]) or None,
            kinds=tuple(d["kinds"]) or None,
            entities=tuple(_csv(d.get("entities") or "")) or None,
            sessions=tuple(d.get("sessions") or ()) or None,
            occurred_after=d.get("occurred_after"),
            occurred_before=d.get("occurred_before"),
            as_of=d.get("as_of"),
            known_at=d.get("known_at"),
            reference_time=d.get("reference_time"),
            rank_by=pick("rank_by"),
            mode=pick("mode"),
            weights=weights,
            strict=bool(d.get("strict")),
            explain=bool(d.get("explain")),
            phase1_strategy=pick("phase1_strategy"),
            answer_type_boost=pick("answer_type_boost"),
            variant_styles=tuple(d["variant_styles"]) or DEFAULTS.variant_styles,
            neighbor_share=pick("neighbor_share"),
            corroboration_share=pick("corroboration_share"),
            max_citations=pick("max_citations"),
            window_boost=pick("window_boost"),
            record_event=True,
        )


def playground_run(
    *, admin: Principal, user: Any, as_principal: Principal, request: RecallRequest
) -> ContextPack:
    """Run ``request`` as ``as_principal`` and audit who ran it (one transaction)."""
    with transaction.atomic():
        pack = recall_run(as_principal, request)
        assert pack.recall_id is not None  # record_event is always on here
        # The audit of who ran it is not telemetry: its commit waits for the disk
        # (recall_run made its transaction's commit asynchronous).
        durable_commit()
        event = RecallEvent.objects.select_for_update().get(pk=pack.recall_id)
        event.params = {
            **event.params,
            "playground": {
                "run_by": admin.label,
                "username": user.get_username(),
                "as": as_principal.label,
            },
        }
        event.save(update_fields=["params"])
    return pack


# --- presentation ---------------------------------------------------------------------


@dataclass
class ChannelRow:
    name: str
    rank: int
    score: float
    weight: float
    rrf: float
    share: float


@dataclass
class ItemView:
    position: int
    item: PackedMemory
    channels: list[ChannelRow]
    explain: dict[str, Any]


@dataclass(frozen=True)
class ChartRow:
    """One bar of the contribution chart, with SVG coordinates worked out."""

    label: str
    text: str
    bar_x: int
    bar_y: float
    width: float
    text_y: float
    value_x: float


@dataclass
class Chart:
    rows: list[ChartRow]
    height: int
    width: int = CHART_LABEL_WIDTH + CHART_BAR_WIDTH + 90

    @property
    def view_box(self) -> str:
        return f"0 0 {self.width} {self.height}"


def chart_of(bars: list[Bar]) -> Chart:
    rows = [
        ChartRow(
            b.label,
            b.text,
            CHART_LABEL_WIDTH,
            b.y + 4,
            max(b.width, 1.0),
            b.y + 17,
            CHART_LABEL_WIDTH + b.width + 6,
        )
        for b in bars
    ]
    return Chart(rows, max(len(rows), 1) * CHART_ROW + 8)


@dataclass
class PlaygroundResult:
    pack: ContextPack
    as_label: str
    items: list[ItemView]
    chart: Chart
    coverage: list[tuple[str, dict[str, Any]]]
    timings: list[tuple[str, float]]
    omitted_reasons: dict[str, int] = field(default_factory=dict)


def channel_totals(pack: ContextPack) -> dict[str, float]:
    """Each channel's summed RRF contribution over the packed items."""
    totals: dict[str, float] = {}
    for item in pack.items:
        for name, entry in ((item.explain or {}).get("channels") or {}).items():
            totals[name] = totals.get(name, 0.0) + float(entry.get("rrf") or 0.0)
    return totals


def present(pack: ContextPack, as_label: str) -> PlaygroundResult:
    """Plain values for the template (no ORM access there)."""
    items = []
    for pos, item in enumerate(pack.items, 1):
        explain = item.explain or {}
        rows = [
            ChannelRow(
                name,
                int(e.get("rank") or 0),
                float(e.get("score") or 0.0),
                float(e.get("weight") or 0.0),
                float(e.get("rrf") or 0.0),
                round(100 * float(e.get("share") or 0.0), 1),
            )
            for name, e in sorted((explain.get("channels") or {}).items())
        ]
        items.append(ItemView(pos, item, rows, explain))
    bars = bar_chart(channel_totals(pack), width=CHART_BAR_WIDTH, row=CHART_ROW)
    omitted: dict[str, int] = {}
    for o in pack.omitted:
        omitted[str(o.get("reason"))] = omitted.get(str(o.get("reason")), 0) + 1
    return PlaygroundResult(
        pack=pack,
        as_label=as_label,
        items=items,
        chart=chart_of(bars),
        coverage=sorted(pack.coverage.items()),
        timings=sorted(
            pack.timings_ms.items(), key=lambda kv: (kv[0] != "total", kv[0])
        ),
        omitted_reasons=omitted,
    )


VERDICT_CHOICES = Verdict.choices


class PlaygroundFeedbackForm(forms.Form):
    """Feedback from the playground: one item (``memory_id``) or the whole recall."""

    recall_id = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    memory_id = forms.IntegerField(
        min_value=1, required=False, widget=forms.HiddenInput
    )
    verdict = forms.ChoiceField(label="Verdict", choices=VERDICT_CHOICES)
    comment = forms.CharField(label="Comment", required=False, max_length=4000)
    expected_memory_id = forms.IntegerField(
        label="Should have come (memory id, for missing)", min_value=1, required=False
    )
