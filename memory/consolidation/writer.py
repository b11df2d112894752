"""Writing derived rows: scope inherited from the sources, idempotency keys, lineage.

A derived row copies ``org``, ``visibility``, ``team`` and owner from the narrowest row
it came from (:func:`narrowest_scope`), so consolidation can never widen who may read a
statement. Every row carries an idempotency key (``consolidate:<kind>:...``), unique per
org, so a re-run finds what it already wrote instead of writing it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

from django.db import connection

from accounts.models import Visibility
from memory.bulk import insert_memories
from memory.models import EmbeddingState, Memory
from memory.services import sha256_text

Scope = tuple[str, int | None, int | None, int | None]  # visibility, team, user, agent
_WIDTH: dict[str, int] = {Visibility.PRIVATE: 0, Visibility.TEAM: 1, Visibility.ORG: 2}
SCOPE_FIELDS = ("visibility", "team_id", "owner_user_id", "owner_agent_id")


def scope_of(row: Any) -> Scope:
    return (row.visibility, row.team_id, row.owner_user_id, row.owner_agent_id)


def scope_label(scope: Scope) -> str:
    return "-".join("" if part is None else str(part) for part in scope)


def narrowest_scope(rows: Iterable[Any]) -> Scope:
    """The scope of the row visible to the fewest principals (ties: the first)."""
    best: Scope | None = None
    for row in rows:
        scope = scope_of(row)
        if best is None or _WIDTH[scope[0]] < _WIDTH[best[0]]:
            best = scope
    if best is None:
        raise ValueError("a derived row needs at least one source")
    return best


def at_midnight(value: date | None) -> datetime | None:
    return datetime.combine(value, time.min, tzinfo=UTC) if value else None


def advisory_lock(*parts: object) -> None:
    """Serialise consolidation of one session for the rest of the transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", [":".join(map(str, parts))]
        )


@dataclass
class DerivedRow:
    """A row to write, its idempotency key and the ids it is derived from."""

    key: str
    tier: str
    kind: str
    content: str
    scope: Scope
    sources: Sequence[int]
    session_id: int | None = None
    speaker: str = ""
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    source_span: dict[str, Any] | None = None
    keywords: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str = ""


def existing_keys(org_id: int, keys: Iterable[str]) -> dict[str, int]:
    keys = list(keys)
    if not keys:
        return {}
    rows = Memory.objects.filter(org_id=org_id, idempotency_key__in=keys)
    return {key: pk for key, pk in rows.values_list("idempotency_key", "id") if key}


def write_rows(
    org_id: int, rows: Sequence[DerivedRow], now: datetime
) -> dict[str, int]:
    """Write the rows whose key is new; returns key -> id for every row (old or new).

    Rows are inserted in one statement (``memory.bulk``) and their lineage in one
    more; callers hold the session's advisory lock, so two workers never race on the
    same keys.
    """
    ids = existing_keys(org_id, (r.key for r in rows))
    pending: dict[str, DerivedRow] = {}
    for r in rows:
        if r.key not in ids:
            pending.setdefault(r.key, r)
    unique = list(pending.values())
    created = insert_memories(
        [
            Memory(
                org_id=org_id,
                session_id=r.session_id,
                tier=r.tier,
                kind=r.kind,
                content=r.content,
                context=r.context,
                speaker=r.speaker[:200],
                metadata=r.metadata,
                content_sha256=sha256_text(r.content),
                idempotency_key=r.key,
                occurred_at=r.occurred_at,
                valid_from=r.valid_from,
                valid_to=r.valid_to,
                recorded_at=now,
                source_span=r.source_span,
                keywords=[k[:100] for k in r.keywords],
                embedding_state=EmbeddingState.PENDING,
                **dict(zip(SCOPE_FIELDS, r.scope, strict=True)),
            )
            for r in unique
        ]
    )
    through = Memory.derived_from.through
    links = [
        through(from_memory_id=m.pk, to_memory_id=src)
        for r, m in zip(unique, created, strict=True)
        for src in dict.fromkeys(r.sources)
    ]
    through.objects.bulk_create(links, batch_size=5000, ignore_conflicts=True)
    ids.update({r.key: m.pk for r, m in zip(unique, created, strict=True)})
    return ids


def add_lineage(pairs: Iterable[tuple[int, int]]) -> None:
    """Link existing derived rows to more sources (``(derived id, source id)``)."""
    through = Memory.derived_from.through
    through.objects.bulk_create(
        [through(from_memory_id=a, to_memory_id=b) for a, b in set(pairs) if a != b],
        ignore_conflicts=True,
    )


def supersede_rows(old_ids: Sequence[int], new_id: int, now: datetime) -> int:
    """Mark active rows superseded by ``new_id`` (kept, never deleted)."""
    return (
        Memory.objects.filter(pk__in=old_ids, status="active")
        .exclude(pk=new_id)
        .update(status="superseded", superseded_by_id=new_id, superseded_at=now)
    )
