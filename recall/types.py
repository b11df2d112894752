"""Request and response shapes of ``recall_run`` (plain frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

# Chosen on LoCoMo dev (docs/benchmarks.md). The graph channel is off by default: on
# conversational data it did not pay for itself (MRR 0.442 without vs 0.407 with at
# weight 0.3); a request can turn it on with weights={"graph": w}.
DEFAULT_WEIGHTS: dict[str, float] = {
    "vector": 1.0,
    "lexical": 1.3,
    "temporal": 0.6,
    "graph": 0.0,
    "recency": 0.0,
}
CHANNELS = tuple(DEFAULT_WEIGHTS)
MODES = ("cascade", "direct")
RANK_BY = ("relevance", "balanced", "freshness")
PHASE1_STRATEGIES = ("merge", "prepend", "none")
PHASE_TIERS: dict[int, tuple[str, ...]] = {
    1: ("semantic", "procedural", "topic"),
    2: ("episodic", "raw"),
    3: ("raw",),
}
PHASE_KINDS: dict[int, tuple[str, ...] | None] = {
    1: None,
    2: ("episode", "observation", "message"),
    3: ("chunk", "artifact"),
}
PHASE1_QUOTAS = {
    "fact": 20,
    "procedure": 10,
    "rule": 10,
    "lesson": 10,
    "topic": 5,
    "digest": 5,
}
BUDGET_LEVELS = ("low", "mid", "high")
ALTITUDES = ("auto", "rows", "digests", "root")
# Which lane brought an item into the pack (``PackedMemory.lane``).
LANES = ("reference", "rule", "lesson", "fused", "fallback")


@dataclass(frozen=True)
class RecallRequest:
    query: str
    budget_tokens: int = 4096
    limit: int = 15
    tiers: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    entities: tuple[str, ...] | None = None
    sessions: tuple[int, ...] | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None
    reference_time: datetime | None = None
    rank_by: str = "relevance"
    mode: str = "cascade"
    weights: dict[str, float] = field(default_factory=dict)
    strict: bool = False
    explain: bool = True
    phase1_strategy: str = "merge"
    answer_type_boost: float = 1.0
    variant_styles: tuple[str, ...] = ("keywords",)
    neighbor_share: float = 0.15
    # A message whose observations rank too takes this share of their best score
    # (recall.pipeline.corroboration). Measured (docs/benchmarks.md, session 10):
    # LoCoMo recall@10 0.746 -> 0.769, NDCG@10 0.527 -> 0.548; LongMemEval turn
    # recall_all@5 0.775 -> 0.803, session 0.915 -> 0.901.
    corroboration_share: float = 0.25
    # Measured on LoCoMo dev (docs/benchmarks.md): 1.1-1.3 all help; 1.2 chosen.
    speaker_boost: float = 1.2
    # Rows inside the query's time window ("a week ago", "in May 2023") are multiplied
    # by this after fusion, and clear the relevance gate at ``window_gate_factor`` x
    # ``min_relevance``. Measured (docs/benchmarks.md): LongMemEval turn recall_all@5
    # 0.676 -> 0.690, session 0.873 -> 0.887; LoCoMo unchanged (0.756 / 0.757 sample).
    window_boost: float = 1.5
    window_gate_factor: float = 0.5
    record_event: bool = True
    # Part two (docs/recall-lanes.md): lanes, controls and the honest no-match.
    session: int | None = None
    prefer_current_session: bool = False
    include_rules: bool = True
    include_lessons: bool = True
    reference_ids: tuple[int, ...] = ()
    include_working_memory: bool = True
    recency_fallback: bool = True
    budget_level: str = "mid"
    env_tags: tuple[str, ...] = ()
    altitude: str = "auto"
    min_relevance: float | None = None  # None: settings.MNEMO_RECALL_MIN_RELEVANCE
    communities_budget_tokens: int = 256
    # Citations per packed item, most relevant first (a digest can trace to dozens of
    # turns). 6 measured on LoCoMo dev with the knowledge tiers (docs/benchmarks.md).
    max_citations: int = 6


@dataclass(frozen=True)
class Degradation:
    code: str
    channel: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "channel": self.channel, "message": self.message}


class RecallUnavailable(Exception):
    """``strict`` recall with a degraded channel, or a required part failing."""

    def __init__(self, degradation: Degradation):
        super().__init__(degradation.message)
        self.degradation = degradation


@dataclass
class PackedMemory:
    id: int
    tier: str
    kind: str
    content: str
    occurred_at: datetime | None
    session: int | None
    visibility: str
    score: float
    tokens: int
    phase: int
    citations: list[dict[str, Any]]
    explain: dict[str, Any] | None
    speaker: str = ""
    external_ref: str = ""
    untrusted: bool = True
    lane: str = "fused"
    # Raw evidence rows the item traces to in all (``citations`` holds the first
    # ``max_citations``; ``GET /memories/{id}/trace`` has the rest).
    citations_total: int = 0


@dataclass
class ContextPack:
    recall_id: int | None
    query: str
    items: list[PackedMemory]
    omitted: list[dict[str, Any]]
    total_tokens: int
    budget_tokens: int
    phase_reached: int
    coverage: dict[str, dict[str, Any]]
    intent: dict[str, Any]
    degradations: list[dict[str, str]]
    timings_ms: dict[str, float]
    no_match: bool = False
    fallback: bool = False
    not_found: list[int] = field(default_factory=list)
    working_memory: dict[str, Any] | None = None
    communities: list[dict[str, Any]] = field(default_factory=list)
    suggested_actions: list[dict[str, Any]] = field(default_factory=list)
    controls: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The pack as plain data for a response: the same shape as
        ``dataclasses.asdict`` without its deep copy of every nested explain dict
        (~4 ms a 15-item pack; the values are built fresh per recall anyway)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["items"] = [
            {f.name: getattr(item, f.name) for f in fields(item)} for item in self.items
        ]
        return out
