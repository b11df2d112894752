"""What was recalled, for whom, and what people and agents said about it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.principals import Principal


class RecallEventQuerySet(models.QuerySet["RecallEvent"]):
    def visible_to(self, principal: Principal) -> RecallEventQuerySet:
        """Org admins see every recall of their org; others see the ones they made."""
        if principal.is_unrestricted:
            return self
        qs = self.filter(org_id=principal.org_id)
        if principal.is_org_admin:
            return qs
        return qs.filter(principal=principal.label)


class RecallEvent(models.Model):
    """One call of ``recall_run``: parameters, ranked ids, phase, coverage, timings."""

    org = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    principal = models.CharField(max_length=100)
    query = models.TextField()
    params = models.JSONField(default=dict)
    item_ids = models.JSONField(default=list)
    omitted_ids = models.JSONField(default=list)
    phase_reached = models.PositiveSmallIntegerField(default=0)
    coverage = models.JSONField(default=dict)
    timings_ms = models.JSONField(default=dict)
    total_tokens = models.PositiveIntegerField(default=0)
    degradations = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RecallEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["org", "created_at"], name="recall_org_created")]

    def __str__(self) -> str:
        return f"recall #{self.pk}: {self.query[:60]}"


class Verdict(models.TextChoices):
    HELPFUL = "helpful", "Helpful"
    IRRELEVANT = "irrelevant", "Irrelevant"
    WRONG = "wrong", "Wrong"
    OUTDATED = "outdated", "Outdated"
    MISSING = "missing", "Missing"


class ReviewStatus(models.TextChoices):
    NEW = "new", "New"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"


class Feedback(models.Model):
    """A verdict on a whole recall or one of its items; reviewed by an operator."""

    org = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    event = models.ForeignKey(RecallEvent, on_delete=models.CASCADE, related_name="feedback")
    memory = models.ForeignKey(
        "memory.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    comment = models.TextField(blank=True, default="")
    expected_memory = models.ForeignKey(
        "memory.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author = models.CharField(max_length=100)
    review_status = models.CharField(
        max_length=10, choices=ReviewStatus.choices, default=ReviewStatus.NEW
    )
    action = models.JSONField(null=True, blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    review_note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["org", "review_status"], name="feedback_org_status")]

    def __str__(self) -> str:
        return f"{self.verdict} on recall {self.event_id}"
