"""What was recalled, for whom, and what people and agents said about it."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from accounts.principals import Principal

MAX_REINFORCEMENT_WEIGHT = 5.0


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

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
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
        indexes = [
            models.Index(fields=["org", "created_at"], name="recall_org_created")
        ]

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


class FeedbackQuerySet(models.QuerySet["Feedback"]):
    def visible_to(self, principal: Principal) -> FeedbackQuerySet:
        """Feedback on recalls the principal may see (admins: all; others: own)."""
        events = RecallEvent.objects.visible_to(principal)
        qs = self.filter(event__in=events)
        if principal.is_unrestricted:
            return qs
        return qs.filter(org_id=principal.org_id)


class Feedback(models.Model):
    """A verdict on a whole recall or one of its items; reviewed by an operator.

    Recording feedback never changes ranking. Only an accepted review does, and only
    through its action (supersede, retract, mark outdated) or, for ``reinforce``, when
    the org's :class:`RecallConfig` turns the reinforcement weight on.
    """

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    event = models.ForeignKey(
        RecallEvent, on_delete=models.CASCADE, related_name="feedback"
    )
    memory = models.ForeignKey(
        "memory.Memory",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    comment = models.TextField(blank=True, default="")
    expected_memory = models.ForeignKey(
        "memory.Memory",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
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

    objects = FeedbackQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["org", "review_status"], name="feedback_org_status")
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on recall {self.event_id}"


class RecallConfig(models.Model):
    """Per-org recall knobs kept in the database (an org without a row uses defaults).

    ``reinforcement_weight`` 0 (the default) means feedback and outcomes never touch
    ranking; above 0, rows with accepted reinforcements or successful outcomes get a
    ``1 + weight * ln(1 + count)`` multiplier (see ``recall.feedback``).
    """

    org = models.OneToOneField(
        "accounts.Organization", on_delete=models.CASCADE, related_name="recall_config"
    )
    reinforcement_weight = models.FloatField(
        default=0.0,
        validators=[
            MinValueValidator(0.0),
            MaxValueValidator(MAX_REINFORCEMENT_WEIGHT),
        ],
        help_text="0 turns reinforcement off; 0.5 gives a row with one accepted "
        "reinforcement a 1.35x boost.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reinforcement_weight__gte=0.0)
                & models.Q(reinforcement_weight__lte=MAX_REINFORCEMENT_WEIGHT),
                name="recall_config_weight_range",
            )
        ]

    def __str__(self) -> str:
        return f"recall config of org {self.org_id}"


class AgentRecallSettings(models.Model):
    """Per-agent opt-ins of the feedback loop (an agent without a row has none)."""

    agent = models.OneToOneField(
        "accounts.Agent", on_delete=models.CASCADE, related_name="recall_settings"
    )
    record_outcomes = models.BooleanField(
        default=False,
        help_text="Allow POST /recall/{id}/outcome to store this agent's answers and "
        "their outcomes as episode memories.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "agent recall settings"

    def __str__(self) -> str:
        return f"recall settings of agent {self.agent_id}"


# --- recall part two (issue 8): working memory and entity communities -----------------


class WorkingState(models.Model):
    """A session's small key/value working memory, recalled first for that session.

    One row per session; ``state`` is replaced as a whole by ``PUT
    /api/v1/sessions/{id}/state``. Who may read or write it follows the session's
    visibility (``memory.services.access_session``).
    """

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    session = models.OneToOneField(
        "memory.Session", on_delete=models.CASCADE, related_name="working_state"
    )
    state = models.JSONField(default=dict)
    updated_by = models.CharField(max_length=100)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"working state of session {self.session_id}"


class Community(models.Model):
    """Entities joined by relationships (label propagation), recomputed per org.

    Holds ids only: recall shows a member relationship only when the principal may
    see the fact row that states it.
    """

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    label = models.BigIntegerField(help_text="The entity id propagation settled on.")
    entity_ids = ArrayField(models.BigIntegerField(), default=list)
    relationship_ids = ArrayField(models.BigIntegerField(), default=list)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "communities"
        indexes = [
            GinIndex(fields=["entity_ids"], name="community_entity_ids_gin"),
            models.Index(fields=["org", "label"], name="community_org_label"),
        ]

    def __str__(self) -> str:
        return f"community {self.label} ({len(self.entity_ids)} entities)"


class TermFrequency(models.Model):
    """How many active rows of one org and tier hold a full-text lexeme.

    Recall's lexical channel decides which query terms find candidates (rare ones) and
    estimates the IDF of the others from these counts instead of counting matching rows
    at query time, which visited tens of thousands of heap rows per term in a 220k-row
    tenant (recall/term_stats.py; docs/architecture.md). Recounted per org by
    ``recall.tasks.refresh_term_stats``; never holds text beyond the lexeme.
    """

    org = models.ForeignKey(
        "accounts.Organization",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
    )
    tier = models.CharField(max_length=16)
    term = models.TextField()
    df = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "tier", "term"], name="termfrequency_org_tier_term"
            )
        ]

    def __str__(self) -> str:
        return f"{self.term} ({self.tier}): {self.df}"


class TermStats(models.Model):
    """When an org's term frequencies were counted; its active rows per tier then."""

    org = models.OneToOneField(
        "accounts.Organization",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
    )
    tier_rows = models.JSONField(default=dict)
    refreshed_at = models.DateTimeField(default=timezone.now)
    seconds = models.FloatField(default=0.0)

    class Meta:
        verbose_name_plural = "term stats"

    def __str__(self) -> str:
        return f"term stats of org {self.org_id} ({self.refreshed_at:%Y-%m-%d %H:%M})"
