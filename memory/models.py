"""The stored memory: sessions, memories of all tiers, entities, relations, conflicts.

Append-only: content is never edited in place. A correction writes a new row and
supersedes the old one (``status``, ``superseded_by``, ``superseded_at``), so the
history that ``as_of`` / ``known_at`` views read is never lost.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from accounts.principals import Principal
from memory.access import AccessControlled, VisibleQuerySet

EMBEDDING_DIM = 384


class Tier(models.TextChoices):
    RAW = "raw", "Raw"
    EPISODIC = "episodic", "Episodic"
    SEMANTIC = "semantic", "Semantic"
    PROCEDURAL = "procedural", "Procedural"
    TOPIC = "topic", "Topic"


KINDS_BY_TIER: dict[str, tuple[str, ...]] = {
    Tier.RAW: ("message", "chunk", "artifact"),
    Tier.EPISODIC: ("episode", "observation"),
    Tier.SEMANTIC: ("fact",),
    Tier.PROCEDURAL: ("procedure", "rule", "lesson"),
    Tier.TOPIC: ("topic", "digest"),
}
ALL_KINDS = tuple(k for kinds in KINDS_BY_TIER.values() for k in kinds)
TIER_OF_KIND = {k: t for t, kinds in KINDS_BY_TIER.items() for k in kinds}


class Status(models.TextChoices):
    ACTIVE = "active", "Active"
    SUPERSEDED = "superseded", "Superseded"
    RETRACTED = "retracted", "Retracted"


class EmbeddingState(models.TextChoices):
    PENDING = "pending", "Pending"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class SessionQuerySet(VisibleQuerySet):
    pass


class Session(AccessControlled):
    """A conversation, run or thread. Messages in it are ordered by ``seq``."""

    external_id = models.CharField(max_length=200)
    participants = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    next_seq = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["org", "external_id"], name="session_unique_external_id_per_org"
            )
        ]

    def __str__(self) -> str:
        return self.external_id


class MemoryQuerySet(VisibleQuerySet):
    def active(self) -> MemoryQuerySet:
        return self.filter(status=Status.ACTIVE)

    def current_as_of(self, as_of: Any) -> MemoryQuerySet:
        """Rows valid in world time ``as_of`` (validity bounds, where stated)."""
        return self.filter(
            Q(valid_from__isnull=True) | Q(valid_from__lte=as_of),
            Q(valid_to__isnull=True) | Q(valid_to__gt=as_of),
        )

    def known_at(self, known_at: Any) -> MemoryQuerySet:
        """Rows the system held as current at system time ``known_at``."""
        return self.filter(recorded_at__lte=known_at).filter(
            Q(superseded_at__isnull=True) | Q(superseded_at__gt=known_at)
        )

    def pending_embedding(self) -> MemoryQuerySet:
        return self.filter(embedding_state=EmbeddingState.PENDING)


class Memory(AccessControlled):
    """One row for every tier and kind: one HNSW and one GIN index serve every phase."""

    # No one-column index: the (org, ...) indexes below serve every org lookup, and
    # each index is written twice per message (insert, then the embedding's update).
    org = models.ForeignKey(
        "accounts.Organization",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
    )
    # No index of its own: ``memory_session_seq`` (session, seq) serves session
    # lookups, and with both present the planner took the one-column index for the
    # neighbour join, reading a whole session per hit (6.5 ms -> 0.8 ms per recall at
    # 100k rows without it; one index less to write on ingest).
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="memories",
        db_index=False,
    )
    seq = models.BigIntegerField(
        null=True, blank=True, help_text="Order in its session."
    )
    tier = models.CharField(max_length=12, choices=Tier.choices)
    kind = models.CharField(max_length=20)
    content = models.TextField()
    # Text that helps find the row but is not part of it (speaker, the turn before, the
    # session date). Indexed with a lower weight; never returned as the content.
    context = models.TextField(blank=True, default="")
    role = models.CharField(max_length=20, blank=True, default="")
    speaker = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)

    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    embedding_state = models.CharField(
        max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING
    )
    embedding_error = models.TextField(blank=True, default="")
    embedding_attempts = models.PositiveSmallIntegerField(default=0)
    embedded_at = models.DateTimeField(null=True, blank=True)
    search = models.GeneratedField(
        expression=SearchVector("content", weight="A", config="english")
        + SearchVector("context", weight="B", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    keywords = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    content_sha256 = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)

    occurred_at = models.DateTimeField(null=True, blank=True)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    superseded_at = models.DateTimeField(null=True, blank=True)

    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.ACTIVE
    )
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="supersedes",
    )
    derived_from = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="derivations"
    )
    source_span = models.JSONField(null=True, blank=True)
    external_ref = models.CharField(max_length=200, blank=True, default="")

    confidence = models.FloatField(default=1.0)
    reinforcement = models.JSONField(default=dict, blank=True)
    env_tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    access_count = models.PositiveIntegerField(default=0)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["-recorded_at", "-id"]
        verbose_name_plural = "memories"
        indexes = [
            # Built over every row; once orgs have their own partial indexes,
            # memory/vector_indexes.py rebuilds it over the other orgs' rows only
            # (a WHERE the migrations do not track; same name, same opclass).
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            # fastupdate off: a pending list (up to 4 MB) is scanned by every search;
            # 229 pending pages cost ~2 ms per full-text probe at 100k rows.
            GinIndex(fields=["search"], name="memory_search_gin", fastupdate=False),
            models.Index(
                fields=["org", "tier", "status"], name="memory_org_tier_status"
            ),
            models.Index(fields=["org", "occurred_at"], name="memory_org_occurred"),
            models.Index(fields=["session", "seq"], name="memory_session_seq"),
            # A write reports exact duplicates of active rows in its session: without
            # this the check read every row of the session (2.26 ms a write of ten
            # messages into a 2,300-row session; docs/benchmarks.md, session 32).
            models.Index(
                fields=["session", "content_sha256"], name="memory_session_sha"
            ),
            # Recall reads the org's distinct speakers by a skip scan over this index.
            models.Index(fields=["org", "speaker"], name="memory_org_speaker"),
            # Recall checks per request whether the org has chunks / artifacts (and
            # rules, lessons) at all: an EXISTS on org, kind, tier and status, planned
            # generically. With (org, kind) alone the generic plan could take
            # memory_org_tier_status and test the kind of every raw row of the
            # tenant: 148 ms a recall for the 1M corpus's largest (0.2 ms with this;
            # docs/benchmarks.md, session 23).
            models.Index(
                fields=["org", "kind", "tier", "status"],
                name="memory_org_kind_tier_status",
            ),
            models.Index(
                fields=["embedding_state", "recorded_at"],
                name="memory_pending",
                condition=Q(embedding_state="pending"),
            ),
            # Every recall counts the caller's rows not embedded yet; without this
            # the count scanned the whole tenant (~26 ms at 22k rows).
            models.Index(
                fields=["org"],
                name="memory_unembedded",
                condition=~Q(embedding_state="ready"),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["org", "idempotency_key"],
                name="memory_unique_idempotency_key_per_org",
                condition=Q(idempotency_key__isnull=False),
            ),
            models.CheckConstraint(
                condition=~Q(visibility="team") | Q(team__isnull=False),
                name="memory_team_visibility_needs_team",
            ),
            models.CheckConstraint(
                condition=~Q(visibility="private")
                | Q(owner_user__isnull=False)
                | Q(owner_agent__isnull=False),
                name="memory_private_needs_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}#{self.pk}: {self.content[:60]}"

    @property
    def is_current(self) -> bool:
        return self.status == Status.ACTIVE


class EntityType(models.TextChoices):
    PERSON = "person", "Person"
    PLACE = "place", "Place"
    ORGANIZATION = "organization", "Organization"
    DATE = "date", "Date/time"
    EVENT = "event", "Event"
    THING = "thing", "Thing"


class Entity(models.Model):
    """A named thing mentioned in memory, resolved within its org."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=200)
    normalized_name = models.CharField(max_length=200)
    type = models.CharField(
        max_length=20, choices=EntityType.choices, default=EntityType.THING
    )
    aliases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    unstable = models.BooleanField(default=False)
    unstable_since = models.DateTimeField(null=True, blank=True)
    merged_into = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged"
    )
    mention_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "entities"
        indexes = [
            GinIndex(
                fields=["normalized_name"],
                opclasses=["gin_trgm_ops"],
                name="entity_name_trgm",
            ),
            HnswIndex(
                name="entity_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["org", "normalized_name"],
                name="entity_unique_name_per_org",
                condition=Q(merged_into__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def visible_ids_q(cls, principal: Principal) -> Q:
        """Entities are visible when a memory the principal may read mentions them."""
        from memory.access import visibility_q

        return Q(org_id=principal.org_id) & Q(
            mentions__memory__in=Memory.objects.filter(visibility_q(principal))
        )


class Mention(models.Model):
    """A memory mentions an entity (at a character span, where known)."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    memory = models.ForeignKey(
        Memory, on_delete=models.CASCADE, related_name="mentions"
    )
    entity = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="mentions"
    )
    surface = models.CharField(max_length=200)
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "entity", "start"], name="mention_unique_span"
            )
        ]
        indexes = [
            models.Index(fields=["entity", "memory"], name="mention_entity_memory")
        ]

    def __str__(self) -> str:
        return f"{self.surface} in memory {self.memory_id}"


class RelationshipQuerySet(VisibleQuerySet):
    def active(self) -> RelationshipQuerySet:
        return self.filter(status=Status.ACTIVE)


class Relationship(AccessControlled):
    """subject -predicate-> object (entity or literal), stated by a fact memory."""

    subject = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="outgoing"
    )
    predicate = models.CharField(max_length=100)
    object_entity = models.ForeignKey(
        Entity, null=True, blank=True, on_delete=models.CASCADE, related_name="incoming"
    )
    object_literal = models.CharField(max_length=500, blank=True, default="")
    statement = models.ForeignKey(
        Memory,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="relationships",
    )
    evidence = models.ManyToManyField(
        Memory, blank=True, related_name="supported_relationships"
    )
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.ACTIVE
    )
    semantic_group = models.CharField(
        max_length=64, blank=True, default="", db_index=True
    )
    asserted_by = models.JSONField(default=list, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    superseded_at = models.DateTimeField(null=True, blank=True)

    objects = RelationshipQuerySet.as_manager()

    class Meta:
        ordering = ["subject", "predicate"]
        indexes = [
            models.Index(
                fields=["org", "subject", "predicate"], name="rel_subject_pred"
            ),
            models.Index(fields=["org", "object_entity"], name="rel_object"),
        ]

    def __str__(self) -> str:
        obj = self.object_entity.name if self.object_entity else self.object_literal
        return f"{self.subject} {self.predicate} {obj}"


class ConflictKind(models.TextChoices):
    FACT = "fact_conflict", "Fact conflict"
    EVIDENCE = "evidence_conflict", "Evidence conflict"


class ConflictStatus(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


class ConflictQuerySet(models.QuerySet["Conflict"]):
    def visible_to(self, principal: Principal) -> ConflictQuerySet:
        """A conflict is visible when the principal may see at least one alternative."""
        from memory.access import visibility_q

        if principal.is_unrestricted:
            return self
        visible = Memory.objects.filter(visibility_q(principal))
        return self.filter(
            org_id=principal.org_id, alternatives__memory__in=visible
        ).distinct()

    def open(self) -> ConflictQuerySet:
        return self.filter(status=ConflictStatus.OPEN)


class Conflict(models.Model):
    """Alternatives that cannot all be current. Resolution keeps the whole history."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=ConflictKind.choices)
    status = models.CharField(
        max_length=10, choices=ConflictStatus.choices, default=ConflictStatus.OPEN
    )
    subject = models.ForeignKey(
        Entity,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conflicts",
    )
    predicate = models.CharField(max_length=100, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    resolution = models.JSONField(null=True, blank=True)
    chosen = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = ConflictQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["org", "status"], name="conflict_org_status")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"


class ConflictAlternative(models.Model):
    """One side of a conflict: a memory (and the relationship it states), supporters."""

    conflict = models.ForeignKey(
        Conflict, on_delete=models.CASCADE, related_name="alternatives"
    )
    memory = models.ForeignKey(
        Memory, on_delete=models.CASCADE, related_name="conflict_sides"
    )
    relationship = models.ForeignKey(
        Relationship, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    quote = models.TextField(blank=True, default="")
    supporters = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conflict", "memory"], name="conflict_alternative_unique"
            )
        ]

    def __str__(self) -> str:
        return f"alternative {self.memory_id} of conflict {self.conflict_id}"


class ConflictEvent(models.Model):
    """Append-only history of a conflict: opened, resolved, dismissed, reopened."""

    conflict = models.ForeignKey(
        Conflict, on_delete=models.CASCADE, related_name="events"
    )
    action = models.CharField(max_length=30)
    actor = models.CharField(max_length=100)
    note = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor}"


class IdempotencyRecord(models.Model):
    """The first response to a request carrying ``Idempotency-Key``, per principal."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    principal = models.CharField(max_length=100)
    key = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(null=True)
    response = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "principal", "key"], name="idempotency_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.principal}:{self.key}"


# --- knowledge tiers (issue 4) -----------------------------------------------------


class ExtractorChoice(models.TextChoices):
    RULES = "rules", "Rule-based (no model service)"
    LLM = "llm", "LLM (OpenAI-compatible API, falls back to rules)"


class KnowledgeSettings(models.Model):
    """Per-org consolidation choices: which extractor runs, and the LLM token budget."""

    org = models.OneToOneField(
        "accounts.Organization",
        on_delete=models.CASCADE,
        related_name="knowledge_settings",
    )
    extractor = models.CharField(
        max_length=10, choices=ExtractorChoice.choices, default=ExtractorChoice.RULES
    )
    llm_monthly_token_budget = models.PositiveIntegerField(
        default=200_000, help_text="Tokens per calendar month; 0 disables the LLM."
    )
    llm_tokens_used = models.PositiveIntegerField(default=0)
    llm_budget_period = models.CharField(
        max_length=7, blank=True, default="", help_text="YYYY-MM the usage counts for."
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "knowledge settings"

    def __str__(self) -> str:
        return f"knowledge settings of org {self.org_id} ({self.extractor})"


class RunStatus(models.TextChoices):
    OK = "ok", "OK"
    FALLBACK = "fallback", "OK with rule-based fallback"
    FAILED = "failed", "Failed"


class ConsolidationRun(models.Model):
    """One consolidation pass over a session: what ran, how far, and what went wrong."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    extractor = models.CharField(max_length=10, choices=ExtractorChoice.choices)
    status = models.CharField(
        max_length=10, choices=RunStatus.choices, default=RunStatus.OK
    )
    cursor_seq = models.BigIntegerField(
        null=True, blank=True, help_text="Messages up to this seq are consolidated."
    )
    stats = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["session", "cursor_seq"], name="run_session_cursor")
        ]

    def __str__(self) -> str:
        return f"consolidation run {self.pk} ({self.status})"


class EntityMerge(models.Model):
    """``source`` was merged into ``target``; ``moved`` records what undo moves back."""

    org = models.ForeignKey(
        "accounts.Organization", on_delete=models.CASCADE, related_name="+"
    )
    source = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="merges_out"
    )
    target = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="merges_in"
    )
    reason = models.CharField(max_length=100)
    scores = models.JSONField(default=dict, blank=True)
    moved = models.JSONField(default=dict, blank=True)
    actor = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"merge {self.source_id} -> {self.target_id}"
