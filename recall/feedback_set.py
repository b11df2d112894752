"""Accepted feedback as a replayable test set, and its replay through ``recall_run``.

A set is JSON: the org's slug and one case per recall that has accepted feedback, with
the query, the parameters it ran with, the principal who ran it, the ids that should
come (``helpful`` items and ``missing`` rows) and the ids that should not (``wrong``,
``irrelevant``, ``outdated`` items). ``manage.py export_feedback`` writes one,
``GET /api/v1/feedback/export`` returns one, ``manage.py replay_feedback`` scores it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import Agent, Organization
from accounts.principals import NoAccess, Principal
from memory.models import ALL_KINDS, Tier
from recall.evaluation.metrics import hit_at_k, mrr
from recall.models import Feedback, ReviewStatus, Verdict
from recall.types import RecallRequest

FORMAT = "mnemo.feedback_set.v1"
POSITIVE = (Verdict.HELPFUL, Verdict.MISSING)
NEGATIVE = (Verdict.WRONG, Verdict.IRRELEVANT, Verdict.OUTDATED)
REPLAY_KS = (1, 5, 10)
_DATETIMES = {
    "occurred_after",
    "occurred_before",
    "as_of",
    "known_at",
    "reference_time",
}
_TUPLES = {"tiers", "kinds", "entities", "sessions", "variant_styles"}


class FeedbackSetError(ValueError):
    """The file is not a feedback set this code can replay."""


@dataclass
class FeedbackCase:
    recall_id: int
    query: str
    principal: str
    params: dict[str, Any]
    expected_ids: list[int] = field(default_factory=list)
    unwanted_ids: list[int] = field(default_factory=list)
    feedback_ids: list[int] = field(default_factory=list)


@dataclass
class FeedbackSet:
    org: str
    cases: list[FeedbackCase]
    exported_at: str = ""


def export_feedback_set(org: Organization) -> dict[str, Any]:
    """Every accepted verdict of ``org``, grouped by recall, as a JSON-ready dict."""
    accepted = (
        Feedback.objects.filter(org=org, review_status=ReviewStatus.ACCEPTED)
        .select_related("event")
        .order_by("event_id", "id")
    )
    cases: dict[int, FeedbackCase] = {}
    for fb in accepted:
        event = fb.event
        case = cases.get(event.pk)
        if case is None:
            params = {k: v for k, v in event.params.items() if k != "playground"}
            case = cases[event.pk] = FeedbackCase(
                event.pk, event.query, event.principal, params
            )
        case.feedback_ids.append(fb.pk)
        if fb.verdict == Verdict.HELPFUL and fb.memory_id:
            _add(case.expected_ids, fb.memory_id)
        elif fb.verdict == Verdict.MISSING and fb.expected_memory_id:
            _add(case.expected_ids, fb.expected_memory_id)
        elif fb.verdict in NEGATIVE and fb.memory_id:
            _add(case.unwanted_ids, fb.memory_id)
    return {
        "format": FORMAT,
        "org": org.slug,
        "exported_at": timezone.now().isoformat(),
        "cases": [c.__dict__ for c in cases.values()],
    }


def _add(ids: list[int], value: int) -> None:
    if value not in ids:
        ids.append(value)


def load_feedback_set(path: str | Path) -> FeedbackSet:
    """Read and check a set written by :func:`export_feedback_set`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise FeedbackSetError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FeedbackSetError(f"{path} is not a {FORMAT} file")
    cases = []
    for i, raw in enumerate(data.get("cases") or []):
        try:
            cases.append(
                FeedbackCase(
                    recall_id=int(raw["recall_id"]),
                    query=str(raw["query"]),
                    principal=str(raw["principal"]),
                    params=dict(raw.get("params") or {}),
                    expected_ids=[int(x) for x in raw.get("expected_ids") or []],
                    unwanted_ids=[int(x) for x in raw.get("unwanted_ids") or []],
                    feedback_ids=[int(x) for x in raw.get("feedback_ids") or []],
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FeedbackSetError(f"case {i}: {exc}") from exc
    return FeedbackSet(
        str(data.get("org", "")), cases, str(data.get("exported_at", ""))
    )


def request_from_params(query: str, params: dict[str, Any]) -> RecallRequest:
    """The ``RecallRequest`` stored ``RecallEvent.params`` describe (no new event)."""
    known = {f.name for f in fields(RecallRequest)} - {"query", "record_event"}
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        if key not in known or value is None:
            continue
        if key in _DATETIMES:
            value = parse_datetime(value) if isinstance(value, str) else None
            if value is None:
                continue
        elif key in _TUPLES:
            value = tuple(value)
        allowed = {"tiers": Tier.values, "kinds": ALL_KINDS}.get(key)
        if allowed is not None and not set(value) <= set(allowed):
            unknown = sorted(set(value) - set(allowed))
            raise FeedbackSetError(f"{key}: unknown names {unknown}")
        kwargs[key] = value
    return RecallRequest(query=query, record_event=False, **kwargs)


def principal_from_label(org: Organization, label: str) -> Principal | None:
    """The principal a recall was run as (``user:ID`` / ``agent:ID``) if it still exists
    in ``org``; ``None`` otherwise (the case is skipped, never run more widely)."""
    kind, _, raw_id = label.partition(":")
    if not raw_id.isdigit():
        return None
    if kind == "agent":
        agent = Agent.objects.filter(pk=int(raw_id), org=org, is_active=True).first()
        return Principal.for_agent(agent) if agent else None
    if kind == "user":
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(pk=int(raw_id), is_active=True).first()
        if user is None:
            return None
        try:
            return Principal.for_user(user, org_id=org.pk)
        except NoAccess:
            return None
    return None


@dataclass
class ReplayReport:
    cases: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    per_case: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)


def replay_feedback_set(
    fset: FeedbackSet,
    *,
    run: Callable[[Principal, RecallRequest], list[int]],
    log: Callable[[str], Any] = lambda _m: None,
) -> ReplayReport:
    """Run every case's query as its principal and score the expected ids.

    ``run`` returns the packed ids best first (``recall_run`` in production). Metrics:
    hit@k and MRR over cases with expected ids; ``unwanted@k`` is the share of cases
    with unwanted ids where one of them is still in the top k.
    """
    try:
        org = Organization.objects.get(slug=fset.org)
    except Organization.DoesNotExist as exc:
        raise FeedbackSetError(f"no organization with slug {fset.org!r}") from exc
    report = ReplayReport()
    sums: dict[str, float] = {}
    counts = {"positive": 0, "negative": 0}
    for case in fset.cases:
        principal = principal_from_label(org, case.principal)
        if principal is None:
            report.skipped.append(
                {"recall_id": case.recall_id, "reason": "principal gone"}
            )
            continue
        ranked = run(principal, request_from_params(case.query, case.params))
        ids = [str(i) for i in ranked]
        row: dict[str, Any] = {
            "recall_id": case.recall_id,
            "query": case.query,
            "ranked": ranked[:20],
        }
        if case.expected_ids:
            gold = [str(i) for i in case.expected_ids]
            counts["positive"] += 1
            for k in REPLAY_KS:
                row[f"hit@{k}"] = hit_at_k(ids, gold, k)
            row["mrr"] = mrr(ids, gold)
        if case.unwanted_ids:
            bad = [str(i) for i in case.unwanted_ids]
            counts["negative"] += 1
            for k in REPLAY_KS:
                row[f"unwanted@{k}"] = hit_at_k(ids, bad, k)
        for key, value in row.items():
            if "@" in key or key == "mrr":
                sums[key] = sums.get(key, 0.0) + float(value)
        report.per_case.append(row)
        report.cases += 1
        log(f"recall #{case.recall_id}: {_fmt(row)}")
    for key, total in sums.items():
        n = counts["negative"] if key.startswith("unwanted") else counts["positive"]
        report.summary[key] = round(total / n, 4) if n else 0.0
    return report


def _fmt(row: dict[str, Any]) -> str:
    parts = [f"{k}={v:.3f}" for k, v in row.items() if "@" in k or k == "mrr"]
    return " ".join(parts) or "no expected or unwanted ids"
