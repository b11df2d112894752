"""Who may see what, for recall: the eligibility rule every channel's SQL starts from.

A :class:`Scope` combines the principal's visibility with the request's filters (tiers,
kinds, sessions, time range) and its view of time: the current view (active rows only),
``known_at`` (system time: rows recorded by then and not yet superseded or retracted
then) or ``as_of`` (world time: rows valid then). Channels never filter after the fact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from accounts.principals import Principal
from config.db.arrays import IntArray, TextArray
from memory.access import visibility_sql
from memory.models import ALL_KINDS, Tier

# The names a scope's own tiers and kinds may hold, spelled into the SQL (below).
_NAMES = frozenset(Tier.values) | frozenset(ALL_KINDS)


def _names_sql(names: tuple[str, ...]) -> str:
    """``IN`` list of tier or kind names as SQL literals. A scope's tiers and kinds
    come from the cascade's phases filtered by the request's validated choices, so a
    name outside the model's is a bug, refused here rather than quoted."""
    unknown = sorted(set(names) - _NAMES)
    if unknown or not names:
        raise ValueError(f"not tier or kind names: {unknown or 'none given'}")
    return ", ".join(f"'{name}'" for name in names)


@dataclass(frozen=True)
class Scope:
    principal: Principal
    tiers: tuple[str, ...]
    kinds: tuple[str, ...] | None = None
    sessions: tuple[int, ...] | None = None
    entity_ids: tuple[int, ...] | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None

    def with_tiers(
        self, tiers: tuple[str, ...], kinds: tuple[str, ...] | None = None
    ) -> Scope:
        from dataclasses import replace

        return replace(
            self, tiers=tiers, kinds=kinds if kinds is not None else self.kinds
        )


def eligibility_sql(scope: Scope, alias: str = "m") -> tuple[str, list[Any]]:
    """``WHERE`` fragment (and params): rows of ``alias`` that ``scope`` may return."""
    a = alias
    vis, params = visibility_sql(scope.principal, a)
    # The scope's tiers and kinds are written as literals, not parameters: statements
    # run with generic plans (the store probe) then plan with their frequencies. With
    # parameters the probe's plan was a coin toss between (org, kind, tier, status)
    # and a smaller index on org alone that reads every row of the tenant, settled by
    # the indexes' sizes (docs/benchmarks.md, session 24).
    parts = [vis, f"{a}.tier IN ({_names_sql(scope.tiers)})"]
    read = scope.principal.read_scopes or {}
    if read.get("tiers"):
        parts.append(f"{a}.tier = ANY(%s)")
        params.append(TextArray(read["tiers"]))
    if read.get("kinds"):
        parts.append(f"{a}.kind = ANY(%s)")
        params.append(TextArray(read["kinds"]))
    if scope.kinds:
        parts.append(f"{a}.kind IN ({_names_sql(scope.kinds)})")
    if scope.sessions:
        parts.append(f"{a}.session_id = ANY(%s)")
        params.append(IntArray(scope.sessions))
    if scope.entity_ids:
        parts.append(
            f"EXISTS (SELECT 1 FROM memory_mention mm WHERE mm.memory_id = {a}.id "
            "AND mm.entity_id = ANY(%s))"
        )
        params.append(IntArray(scope.entity_ids))
    if scope.occurred_after:
        parts.append(f"{a}.occurred_at >= %s")
        params.append(scope.occurred_after)
    if scope.occurred_before:
        parts.append(f"{a}.occurred_at < %s")
        params.append(scope.occurred_before)
    if scope.known_at is not None:
        parts.append(
            f"{a}.recorded_at <= %s AND "
            f"({a}.superseded_at IS NULL OR {a}.superseded_at > %s)"
        )
        params += [scope.known_at, scope.known_at]
    if scope.as_of is not None:
        # World time: a row is valid from valid_from (else when it happened, else when
        # it was recorded) until valid_to (else until it was superseded). Retracted rows
        # were never valid.
        parts.append(
            f"{a}.status <> 'retracted' "
            f"AND COALESCE({a}.valid_from, {a}.occurred_at, {a}.recorded_at) <= %s "
            f"AND COALESCE({a}.valid_to, CASE WHEN {a}.status = 'superseded' "
            f"THEN {a}.superseded_at END, 'infinity'::timestamptz) > %s"
        )
        params += [scope.as_of, scope.as_of]
    if scope.known_at is None and scope.as_of is None:
        parts.append(f"{a}.status = 'active'")
    return " AND ".join(parts), params
