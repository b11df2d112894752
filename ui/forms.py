"""Input parsing for the console: GET filter forms (bookmarkable) and POST actions."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django import forms
from django.utils import timezone

from accounts.models import Visibility
from memory.models import ALL_KINDS, Status, Tier
from recall.models import Verdict

ANY = [("", "Any")]


def _choices(pairs: Any) -> list[tuple[str, str]]:
    return ANY + [(str(v), str(label)) for v, label in pairs]


def start_of(day: Any) -> datetime | None:
    """A date as the first instant of that day in the current time zone."""
    if not day:
        return None
    return timezone.make_aware(datetime.combine(day, time.min))


def end_of(day: Any) -> datetime | None:
    """A date as the last instant of that day in the current time zone."""
    if not day:
        return None
    return timezone.make_aware(datetime.combine(day, time.max))


class MemoryFilterForm(forms.Form):
    """Explorer filters; every field is a GET parameter, so the URL is the bookmark."""

    q = forms.CharField(
        label="Search",
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "full text"}),
    )
    tier = forms.ChoiceField(
        label="Tier", required=False, choices=_choices(Tier.choices)
    )
    kind = forms.ChoiceField(
        label="Kind", required=False, choices=ANY + [(k, k) for k in ALL_KINDS]
    )
    status = forms.ChoiceField(
        label="Status", required=False, choices=_choices(Status.choices)
    )
    visibility = forms.ChoiceField(
        label="Visibility", required=False, choices=_choices(Visibility.choices)
    )
    entity = forms.CharField(
        label="Entity",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "name or id"}),
    )
    session = forms.CharField(
        label="Session",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "external id or id"}),
    )
    since = forms.DateField(
        label="From", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label="To", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )


class SessionFilterForm(forms.Form):
    q = forms.CharField(
        label="External id",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"type": "search"}),
    )
    pending = forms.BooleanField(label="Only with pending work", required=False)


class EntityFilterForm(forms.Form):
    q = forms.CharField(
        label="Name",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"type": "search"}),
    )


class ConflictFilterForm(forms.Form):
    status = forms.ChoiceField(
        label="Status",
        required=False,
        choices=[
            ("open", "Open"),
            ("resolved", "Resolved"),
            ("dismissed", "Dismissed"),
            ("all", "All"),
        ],
    )


class ConflictActionForm(forms.Form):
    """Resolve (choose one), both valid (optional bounds) or dismiss; with a note."""

    ACTIONS = [
        ("choose", "Choose one"),
        ("both_valid", "Both valid"),
        ("dismiss", "Dismiss"),
    ]

    action = forms.ChoiceField(choices=ACTIONS)
    chosen = forms.IntegerField(required=False)
    note = forms.CharField(
        label="Note",
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "choose" and not data.get("chosen"):
            raise forms.ValidationError("Choose the alternative that is current.")
        return data


def bounds_from_post(
    post: Any, alternative_ids: list[int]
) -> dict[int, tuple[datetime | None, datetime | None]]:
    """``from_<id>`` / ``to_<id>`` date fields of the both-valid form, parsed."""
    field = forms.DateField(required=False)
    bounds: dict[int, tuple[datetime | None, datetime | None]] = {}
    for alt in alternative_ids:
        start = field.clean(post.get(f"from_{alt}") or None)
        end = field.clean(post.get(f"to_{alt}") or None)
        if start or end:
            bounds[alt] = (start_of(start), end_of(end))
    return bounds


class FeedbackFilterForm(forms.Form):
    verdict = forms.ChoiceField(
        label="Verdict", required=False, choices=_choices(Verdict.choices)
    )
    status = forms.ChoiceField(
        label="Review status",
        required=False,
        choices=[
            ("new", "New"),
            ("accepted", "Accepted"),
            ("rejected", "Rejected"),
            ("all", "All"),
        ],
    )


class FeedbackReviewForm(forms.Form):
    """Accept with an action on the memory, or reject; the note is kept."""

    DECISIONS = [("accept", "Accept"), ("reject", "Reject")]
    ACTIONS = [
        ("supersede", "Supersede with a correction"),
        ("retract", "Retract"),
        ("reinforce", "Reinforce"),
        ("outdated", "Mark outdated"),
        ("none", "No change to memory"),
    ]

    decision = forms.ChoiceField(choices=DECISIONS)
    action = forms.ChoiceField(label="Action", choices=ACTIONS, required=False)
    correction = forms.CharField(
        label="Correction",
        required=False,
        max_length=32_000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    note = forms.CharField(
        label="Note",
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == "accept":
            action = data.get("action") or "none"
            data["action"] = action
            if action == "supersede" and not (data.get("correction") or "").strip():
                raise forms.ValidationError("A supersede needs the corrected text.")
        return data
