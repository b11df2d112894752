"""Frozen value types shared by the recall pipeline steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Candidate:
    """One recallable row as the pipeline sees it (already visibility-checked).

    ``covers`` lists the ids a topic digest summarises; ``neighbors`` the ids of
    adjacent turns in the same session. ``extra`` carries anything else a caller
    wants to thread through; it takes no part in equality or hashing.
    """

    id: int
    tier: str
    kind: str
    content: str
    session_id: int | None = None
    occurred_at: datetime | None = None
    recorded_at: datetime | None = None
    stale: bool = False
    covers: frozenset[int] = frozenset()
    neighbors: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ChannelHit:
    """A memory returned by one retrieval channel, at a 1-based ``rank``."""

    channel: str
    memory_id: int
    rank: int
    score: float
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ChannelContribution:
    """What one channel added to a fused score: ``rrf = weight / (k + rank)``."""

    channel: str
    rank: int
    score: float
    weight: float
    rrf: float


@dataclass(frozen=True, slots=True)
class FusedItem:
    """A memory after fusion, with everything needed to explain its score.

    ``boosts`` and ``penalties`` hold named multipliers (> 1 and < 1) already
    applied to ``score``. ``spread_from`` maps a neighbouring hit's id to the
    additive score it passed on (see ``fusion.spread_to_neighbors``).
    """

    memory_id: int
    score: float
    contributions: tuple[ChannelContribution, ...] = ()
    boosts: Mapping[str, float] = field(default_factory=dict, hash=False)
    penalties: Mapping[str, float] = field(default_factory=dict, hash=False)
    phase: int = 1
    spread_from: Mapping[int, float] = field(default_factory=dict, hash=False)
    # The derived row whose score this item took a share of (``corroboration``).
    corroborated_by: int | None = None
