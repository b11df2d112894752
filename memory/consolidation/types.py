"""Plain data passed between extractors and the writers (no Django imports)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime


@dataclass(frozen=True)
class MessageView:
    """What an extractor sees of one raw message."""

    id: int
    content: str
    speaker: str
    role: str
    occurred_at: datetime | None
    seq: int | None = None


@dataclass(frozen=True)
class ResolvedDate:
    """A date phrase in a text and the absolute date it means (day..year)."""

    text: str
    start: int
    end: int
    value: date
    granularity: str  # "day" | "week" | "month" | "year"

    @property
    def label(self) -> str:
        if self.granularity == "year":
            return str(self.value.year)
        if self.granularity == "month":
            return self.value.strftime("%B %Y")
        day = f"{self.value.day} {self.value.strftime('%B %Y')}"
        return f"the week of {day}" if self.granularity == "week" else day

    def as_json(self) -> dict[str, str]:
        return {
            "text": self.text,
            "value": self.value.isoformat(),
            "granularity": self.granularity,
            "label": self.label,
        }


_SPECIFICITY = {"day": 0, "week": 1, "month": 2, "year": 3}


@dataclass(frozen=True)
class ObservationDraft:
    """A salient statement of one message, attributed and with dates made absolute."""

    message_id: int
    index: int
    content: str
    quote_start: int
    quote_end: int
    speaker: str
    dates: tuple[ResolvedDate, ...] = ()

    @property
    def event_date(self) -> date | None:
        """The date the statement is about: its most specific one, the first named
        when several are as specific ("last Saturday, which was on the 17th of June"
        -> that Saturday; "in 2019, on March 3rd" -> March 3rd). None without dates."""
        if not self.dates:
            return None  # min() keeps the first of equals: the first named wins a tie
        return min(self.dates, key=lambda d: _SPECIFICITY[d.granularity]).value


@dataclass(frozen=True)
class FactDraft:
    """subject -predicate-> object, stated by observation ``observation``."""

    message_id: int
    observation: int
    subject: str
    predicate: str
    object: str
    content: str
    negated: bool = False
    change: bool = (
        False  # "moved to", "now works at": the statement replaces an old one
    )
    valid_from: date | None = None
    valid_to: date | None = None
    subject_type: str = "person"
    object_type: str = "thing"


@dataclass(frozen=True)
class ProcedureDraft:
    """A how-to, rule or lesson found in observation ``observation`` of a message."""

    message_id: int
    observation: int
    kind: str  # "procedure" | "rule" | "lesson"
    content: str


@dataclass
class Extraction:
    """Everything one extractor pass produced, plus errors it recovered from."""

    observations: list[ObservationDraft] = field(default_factory=list)
    facts: list[FactDraft] = field(default_factory=list)
    procedures: list[ProcedureDraft] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    tokens_used: int = 0
    extractor: str = "rules"
    fell_back: bool = False
    # Which extractor produced each message's rows, where it differs from ``extractor``.
    by_message: dict[int, str] = field(default_factory=dict)

    def produced_by(self, message_id: int) -> str:
        return self.by_message.get(message_id, self.extractor)

    def extend(self, other: Extraction) -> None:
        self.observations += other.observations
        self.facts += other.facts
        self.procedures += other.procedures
        self.errors += other.errors
        self.tokens_used += other.tokens_used
        self.fell_back = self.fell_back or other.fell_back
        self.by_message.update(other.by_message)
