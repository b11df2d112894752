"""Writes with side effects: remember, supersede, retract, embed, sweep.

Each state change is one function in one transaction; background work is enqueued only
after the transaction commits (``transaction.on_commit``), so a rollback never leaves a
task pointing at rows that do not exist, and a broker outage never fails a write: rows
stay ``pending`` and the sweep picks them up.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Team, Visibility
from accounts.principals import Principal
from memory.access import visibility_q
from memory.bulk import insert_memories
from memory.models import (
    KINDS_BY_TIER,
    TIER_OF_KIND,
    EmbeddingState,
    Memory,
    Session,
    Status,
    Tier,
)

logger = logging.getLogger(__name__)


class WriteError(Exception):
    """Bad input to a write; ``field`` names the culprit (``memories[2].kind``)."""

    def __init__(
        self, message: str, *, field: str = "non_field_errors", status: int = 400
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


class NotFound(Exception):
    """Missing, or not visible to the principal: the two are deliberately the same."""


class Forbidden(Exception):
    """The principal may see the object but not change it."""


class StateConflict(Exception):
    """The object is not in a state that allows the change (e.g. already superseded)."""


@dataclass(frozen=True)
class MemoryInput:
    """One item to remember, already parsed (types checked) by the API layer."""

    content: str
    tier: str = Tier.RAW
    kind: str = "message"
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    role: str = ""
    speaker: str = ""
    context: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    external_ref: str = ""
    visibility: str | None = None
    team_id: int | None = None
    derived_from: tuple[int, ...] = ()
    source_span: dict[str, Any] | None = None
    confidence: float = 1.0
    env_tags: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    idempotency_key: str | None = None


@dataclass
class RememberResult:
    memories: list[Memory]
    duplicates: list[dict[str, Any]]
    replayed: list[int]

    @property
    def pending(self) -> int:
        return sum(
            1 for m in self.memories if m.embedding_state == EmbeddingState.PENDING
        )


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- access ---------------------------------------------------------------------------


def access_memory(
    principal: Principal, memory_id: int, *, for_update: bool = False
) -> Memory:
    """The memory if the principal may read it; NotFound if missing or not theirs."""
    qs = Memory.objects.filter(visibility_q(principal))
    if for_update:
        qs = qs.select_for_update()
    try:
        return qs.get(pk=memory_id)
    except (Memory.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("memory not found") from exc


def access_session(
    principal: Principal, session_id: int, *, for_update: bool = False
) -> Session:
    qs = Session.objects.visible_to(principal)
    if for_update:
        qs = qs.select_for_update()
    try:
        return qs.get(pk=session_id)
    except (Session.DoesNotExist, ValueError, TypeError, OverflowError) as exc:
        raise NotFound("session not found") from exc


def _require_writer(principal: Principal) -> None:
    if not principal.can_write:
        raise Forbidden("this principal has read-only access")


def _resolve_access(
    principal: Principal,
    *,
    visibility: str | None,
    team_id: int | None,
    default_visibility: str,
    default_team_id: int | None,
    field_prefix: str,
) -> tuple[str, int | None]:
    """Pick and check the (visibility, team) of a new row for this principal."""
    vis = visibility or default_visibility
    if vis not in Visibility.values:
        raise WriteError(
            f"unknown visibility {vis!r}", field=f"{field_prefix}visibility"
        )
    if vis != Visibility.TEAM:
        return vis, None
    team = team_id or default_team_id
    if team is None and len(principal.team_ids) == 1:
        team = next(iter(principal.team_ids))
    if team is None:
        raise WriteError(
            "team visibility needs a team: pass team_id (you belong to "
            f"{len(principal.team_ids)} teams)",
            field=f"{field_prefix}team_id",
        )
    if not principal.is_unrestricted and team not in principal.team_ids:
        # Writing into a team you are not in would hide the row from yourself, or
        # leak it into a team of another org: refuse both the same way.
        raise WriteError("unknown team", field=f"{field_prefix}team_id")
    return vis, team


def _default_visibility(principal: Principal) -> str:
    if principal.kind == "agent" and principal.agent_id is not None:
        from accounts.models import Agent

        return Agent.objects.values_list("default_visibility", flat=True).get(
            pk=principal.agent_id
        )
    return Visibility.ORG


# --- sessions -------------------------------------------------------------------------


def session_create(
    *,
    principal: Principal,
    external_id: str,
    participants: Sequence[str] = (),
    started_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
    visibility: str | None = None,
    team_id: int | None = None,
) -> Session:
    """Create a session; an existing ``external_id`` in the org is a 409."""
    _require_writer(principal)
    vis, team = _resolve_access(
        principal,
        visibility=visibility,
        team_id=team_id,
        default_visibility=_default_visibility(principal),
        default_team_id=None,
        field_prefix="",
    )
    with transaction.atomic():
        existing = Session.objects.filter(
            org_id=principal.org_id, external_id=external_id
        )
        if existing.exists():
            raise StateConflict(f"a session with external_id {external_id!r} exists")
        return Session.objects.create(
            org_id=principal.owner_org_id,
            external_id=external_id,
            participants=list(participants),
            started_at=started_at,
            metadata=metadata or {},
            visibility=vis,
            team_id=team,
            owner_user_id=principal.user_id,
            owner_agent_id=principal.agent_id,
        )


# --- remember -------------------------------------------------------------------------


def _validate_item(item: MemoryInput, index: int, prefix: str) -> None:
    where = f"{prefix}[{index}]"
    if not item.content or not item.content.strip():
        raise WriteError("content must not be empty", field=f"{where}.content")
    size = len(item.content.encode())
    if size > settings.MNEMO_MAX_CONTENT_BYTES:
        raise WriteError(
            f"content is {size} bytes; the limit is {settings.MNEMO_MAX_CONTENT_BYTES}",
            field=f"{where}.content",
        )
    if item.tier not in KINDS_BY_TIER:
        raise WriteError(
            f"unknown tier {item.tier!r}; one of {sorted(KINDS_BY_TIER)}",
            field=f"{where}.tier",
        )
    if item.kind not in KINDS_BY_TIER[item.tier]:
        raise WriteError(
            f"kind {item.kind!r} does not belong to tier {item.tier!r}; "
            f"one of {list(KINDS_BY_TIER[item.tier])}",
            field=f"{where}.kind",
        )
    if item.valid_from and item.valid_to and item.valid_to <= item.valid_from:
        raise WriteError("valid_to must be after valid_from", field=f"{where}.valid_to")


def memory_remember(
    *,
    principal: Principal,
    items: Sequence[MemoryInput],
    session: Session | None = None,
    field_prefix: str = "memories",
    enqueue: bool = True,
) -> RememberResult:
    """Write a batch of memories: all or nothing, embedded after commit.

    Exact duplicates (same content hash) of active rows already in the same session,
    or earlier in the batch, are written and *reported* in ``duplicates``. An item
    whose ``idempotency_key`` was already used in the org is not written again: the
    existing row is returned and listed in ``replayed``.
    """
    _require_writer(principal)
    if not items:
        raise WriteError("at least one item is required", field=field_prefix)
    if len(items) > settings.MNEMO_MAX_BATCH:
        raise WriteError(
            f"{len(items)} items; the batch limit is {settings.MNEMO_MAX_BATCH}",
            field=field_prefix,
        )
    for i, item in enumerate(items):
        _validate_item(item, i, field_prefix)

    default_vis = session.visibility if session else _default_visibility(principal)
    default_team = session.team_id if session else None
    now = timezone.now()
    with transaction.atomic():
        if session is not None:
            session.next_seq = _lock_next_seq(session.pk)
        sources = _check_sources(principal, items, field_prefix)
        keys = [i.idempotency_key for i in items if i.idempotency_key]
        # No keys, no query: compiling the empty IN cost ~8% of a POST (session 33).
        replay = (
            {
                m.idempotency_key: m
                for m in Memory.objects.filter(
                    org_id=principal.org_id, idempotency_key__in=keys
                )
            }
            if keys
            else {}
        )
        hashes = [sha256_text(i.content) for i in items]
        seen: dict[str, int] = {}
        if session is not None:
            seen = dict(
                Memory.objects.filter(
                    session=session, content_sha256__in=hashes, status=Status.ACTIVE
                ).values_list("content_sha256", "id")
            )
        previous = _last_message(session) if session is not None else None
        rows: list[Memory] = []
        duplicates: list[dict[str, Any]] = []
        replayed: list[int] = []
        for i, (item, digest) in enumerate(zip(items, hashes, strict=True)):
            if item.idempotency_key and item.idempotency_key in replay:
                replayed.append(replay[item.idempotency_key].pk)
                continue
            vis, team = _resolve_access(
                principal,
                visibility=item.visibility,
                team_id=item.team_id,
                default_visibility=default_vis,
                default_team_id=default_team,
                field_prefix=f"{field_prefix}[{i}].",
            )
            vis, team = _no_wider_than_sources(vis, team, sources, item, principal)
            seq = None
            if session is not None:
                seq = session.next_seq
                session.next_seq += 1
            if digest in seen:
                duplicates.append({"index": i, "duplicate_of": seen[digest]})
            occurred = item.occurred_at or (now if session is not None else None)
            context = item.context
            if session is not None and item.kind == "message" and not context:
                context = message_context(previous, occurred)
            if item.kind == "message":
                previous = (item.speaker, item.content)
            rows.append(
                Memory(
                    org_id=principal.owner_org_id,
                    session=session,
                    seq=seq,
                    tier=item.tier,
                    kind=item.kind,
                    content=item.content,
                    context=context,
                    role=item.role,
                    speaker=item.speaker,
                    metadata=item.metadata,
                    content_sha256=digest,
                    idempotency_key=item.idempotency_key,
                    occurred_at=occurred,
                    valid_from=item.valid_from,
                    valid_to=item.valid_to,
                    recorded_at=now,
                    source_span=item.source_span,
                    external_ref=item.external_ref,
                    confidence=item.confidence,
                    env_tags=list(item.env_tags),
                    keywords=list(item.keywords),
                    visibility=vis,
                    team_id=team,
                    owner_user_id=principal.user_id,
                    owner_agent_id=principal.agent_id,
                )
            )
            seen.setdefault(digest, -1 - i)
        created = insert_memories(rows)
        # Duplicates of rows earlier in this batch point at their new ids.
        by_index = {}
        pos = 0
        for i, item in enumerate(items):
            if item.idempotency_key and item.idempotency_key in replay:
                continue
            by_index[i] = created[pos]
            pos += 1
        for dup in duplicates:
            if dup["duplicate_of"] < 0:
                dup["duplicate_of"] = by_index[-1 - dup["duplicate_of"]].pk
        links = [
            Memory.derived_from.through(from_memory_id=by_index[i].pk, to_memory_id=src)
            for i, item in enumerate(items)
            if i in by_index
            for src in item.derived_from
        ]
        if links:
            Memory.derived_from.through.objects.bulk_create(links)
        if session is not None:
            _store_next_seq(session.pk, session.next_seq)
        if enqueue:
            enqueue_embedding([m.pk for m in created])
    existing = list(Memory.objects.filter(pk__in=replayed)) if replayed else []
    return RememberResult(
        memories=created + existing, duplicates=duplicates, replayed=replayed
    )


def _lock_next_seq(session_id: int) -> int:
    """Lock the session's row for this transaction and read its next ``seq``: the
    lock serialises seq numbers for concurrent writers of one session.

    One statement by hand: the ORM's ``select_for_update().get()`` and ``save()``
    spent ~10% of a 10-message POST compiling queries (py-spy, session 33).
    """
    with connection.cursor() as c:
        c.execute(
            "SELECT next_seq FROM memory_session WHERE id = %s FOR UPDATE",
            [session_id],
        )
        row = c.fetchone()
    if row is None:
        raise NotFound("session not found")
    return int(row[0])


def _store_next_seq(session_id: int, next_seq: int) -> None:
    with connection.cursor() as c:
        c.execute(
            "UPDATE memory_session SET next_seq = %s WHERE id = %s",
            [next_seq, session_id],
        )


CONTEXT_PREVIOUS_CHARS = 300


def _last_message(session: Session) -> tuple[str, str] | None:
    row = (
        Memory.objects.filter(session=session, kind="message")
        .order_by("-seq")
        .values_list("speaker", "content")
        .first()
    )
    return (row[0], row[1]) if row else None


def message_context(previous: tuple[str, str] | None, occurred: datetime | None) -> str:
    """Retrieval context of a message: when it was said and the turn it answers.

    A reply ("Yes, last Tuesday!") is often unfindable on its own words; the turn
    before it and the date carry what a later question asks about.
    """
    parts = []
    if occurred is not None:
        parts.append(occurred.strftime("%-d %B %Y"))
    if previous is not None:
        speaker, content = previous
        text = content[:CONTEXT_PREVIOUS_CHARS]
        parts.append(f"{speaker}: {text}" if speaker else text)
    return " | ".join(parts)


def _check_sources(
    principal: Principal, items: Sequence[MemoryInput], prefix: str
) -> dict[int, Memory]:
    wanted = {src for item in items for src in item.derived_from}
    if not wanted:
        return {}
    found = {
        m.pk: m for m in Memory.objects.filter(visibility_q(principal), pk__in=wanted)
    }
    for i, item in enumerate(items):
        for src in item.derived_from:
            if src not in found:
                raise WriteError(
                    f"derived_from: memory {src} not found",
                    field=f"{prefix}[{i}].derived_from",
                )
    return found


_WIDTH: dict[str, int] = {
    Visibility.PRIVATE: 0,
    Visibility.TEAM: 1,
    Visibility.ORG: 2,
}


def _no_wider_than_sources(
    vis: str,
    team: int | None,
    sources: dict[int, Memory],
    item: MemoryInput,
    principal: Principal,
) -> tuple[str, int | None]:
    """A derived row is never visible to more people than its narrowest source row."""
    for src in (sources[s] for s in item.derived_from):
        if _WIDTH[src.visibility] < _WIDTH[vis] or (
            src.visibility == vis == Visibility.TEAM and src.team_id != team
        ):
            vis, team = src.visibility, src.team_id
    return vis, team


def memory_supersede(
    *, principal: Principal, memory_id: int, correction: MemoryInput, reason: str = ""
) -> Memory:
    """Write ``correction`` as the new current version of ``memory_id``; link both."""
    _require_writer(principal)
    _validate_item(correction, 0, "correction")
    with transaction.atomic():
        old = access_memory(principal, memory_id, for_update=True)
        if old.status != Status.ACTIVE:
            raise StateConflict(
                f"memory {old.pk} is {old.status}; only active rows can be superseded"
            )
        now = timezone.now()
        new = Memory.objects.create(
            org_id=old.org_id,
            session=old.session,
            tier=correction.tier or old.tier,
            kind=correction.kind or old.kind,
            content=correction.content,
            context=correction.context,
            role=old.role,
            speaker=correction.speaker or old.speaker,
            metadata={**correction.metadata, "supersedes": old.pk, "reason": reason},
            content_sha256=sha256_text(correction.content),
            occurred_at=correction.occurred_at or old.occurred_at,
            valid_from=correction.valid_from,
            valid_to=correction.valid_to,
            recorded_at=now,
            external_ref=old.external_ref,
            confidence=correction.confidence,
            env_tags=list(correction.env_tags or old.env_tags),
            visibility=old.visibility,
            team_id=old.team_id,
            owner_user_id=old.owner_user_id,
            owner_agent_id=old.owner_agent_id,
        )
        new.derived_from.set(old.derived_from.all())
        old.status = Status.SUPERSEDED
        old.superseded_by = new
        old.superseded_at = now
        old.save(update_fields=["status", "superseded_by", "superseded_at"])
        enqueue_embedding([new.pk])
    return new


def memory_retract(*, principal: Principal, memory_id: int, reason: str = "") -> Memory:
    """Mark a memory retracted (kept, never deleted); it leaves every current view."""
    _require_writer(principal)
    with transaction.atomic():
        memory = access_memory(principal, memory_id, for_update=True)
        if memory.status != Status.ACTIVE:
            raise StateConflict(f"memory {memory.pk} is {memory.status}")
        now = timezone.now()
        memory.status = Status.RETRACTED
        memory.superseded_at = now
        memory.metadata = {
            **memory.metadata,
            "retraction": {
                "by": principal.label,
                "at": now.isoformat(),
                "reason": reason,
            },
        }
        memory.save(update_fields=["status", "superseded_at", "metadata"])
    return memory


# --- embedding ------------------------------------------------------------------------


def enqueue_embedding(ids: Sequence[int]) -> None:
    """After commit, hand ``ids`` to the embedding task in batches (never in a txn)."""
    ids = list(ids)
    if not ids:
        return
    batch = settings.MNEMO_EMBEDDING_TASK_ROWS

    def send() -> None:
        from memory.tasks import embed_memories

        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            try:
                embed_memories.delay(chunk)
            except Exception as exc:  # noqa: BLE001 - the broker being down must not fail writes
                logger.warning(
                    "could not enqueue %d rows for embedding (%s); "
                    "the sweep will retry",
                    len(chunk),
                    exc,
                )

    transaction.on_commit(send)


def embedding_text(memory: Memory) -> str:
    """What the vector index sees: the speaker and the content.

    The retrieval context (date, previous turn) goes into the full-text index only:
    measured on LoCoMo dev, leaving it out of the embedded text raised NDCG@10 from
    0.467 to 0.483 (it dilutes the turn's own meaning).
    """
    speaker, content = memory.speaker, memory.content
    if not speaker or content.startswith(f"{speaker}: "):
        # An observation of an unnamed speaker already reads "Speaker: ...".
        return content
    return f"{speaker}: {content}"


def memory_embed(
    *,
    ids: Sequence[int],
    refill: Callable[[], Sequence[int]] | None = None,
) -> int:
    """Embed the pending/failed rows among ``ids``; returns how many became ready.

    Rows go in chunks of ``MNEMO_EMBEDDING_BATCH``, oldest first, each chunk stored
    (vectors, then entity links) in its own transaction as soon as it is embedded.
    While one chunk is stored the next one is already being embedded on a second
    thread: the model holds one core and the database works on the other, instead
    of each waiting for the other (docs/benchmarks.md, session 11).

    ``refill`` (the embedding task's) is asked for more row ids whenever the last
    chunk has been embedded, before it is stored; what it returns is embedded next
    while that chunk is stored, until it returns none. Rows written while a task
    runs are then embedded by it at once, not by a task queued behind the no-op tasks
    of the rows it already took (docs/benchmarks.md, session 32).

    Idempotent: rows already ready are skipped, and the model is deterministic, so two
    workers embedding the same row write the same vector (up to float rounding where
    bf16 arithmetic is on: cosine >= 0.9999 between batches of different shapes).
    """
    from memory import embeddings

    size = max(1, settings.MNEMO_EMBEDDING_BATCH)

    def chunked(row_ids: Sequence[int]) -> list[list[Memory]]:
        rows = list(
            Memory.objects.filter(pk__in=list(row_ids))
            .exclude(embedding_state=EmbeddingState.READY)
            .only("id", "content", "speaker", "org_id")
            .order_by("id")
        )
        return [rows[i : i + size] for i in range(0, len(rows), size)]

    def embed(chunk: list[Memory]) -> Any:
        return embeddings.embed_texts([embedding_text(m) for m in chunk])

    chunks = deque(chunked(ids))
    if not chunks:
        return 0
    if len(chunks) == 1 and refill is None:
        _store_embedded(chunks[0], embed(chunks[0]))
        return len(chunks[0])
    done = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as pool:
        ahead = pool.submit(embed, chunks[0])
        while chunks:
            chunk = chunks.popleft()
            vectors = ahead.result()
            while not chunks and refill is not None:
                more = refill()
                if not more:
                    break
                chunks.extend(chunked(more))
            if chunks:
                ahead = pool.submit(embed, chunks[0])
            _store_embedded(chunk, vectors)
            done += len(chunk)
    return done


def _store_embedded(rows: list[Memory], vectors: Any) -> None:
    """One chunk's vectors and entity links, in one transaction."""
    from memory import entities

    with transaction.atomic():
        _store_vectors([m.pk for m in rows], vectors)
        entities.extract_and_link(rows=rows)


def _store_vectors(ids: list[int], vectors: Any) -> None:
    """``UPDATE ... FROM unnest(ids, vectors)``, the vectors sent in binary.

    Django's ``bulk_update`` compiles a ``CASE WHEN id = ... THEN '[0.0123,...]'``
    per row and column and prints every vector as text: in a profile of the worker
    under ingest that compilation and printing were ~25% of its main thread, and the
    database parsed the text back. Here one statement joins two arrays, through a
    server-side-binding cursor on the same connection (and transaction), so pgvector's
    binary dumper applies (Django's own cursors bind on the client, as text).
    """
    import psycopg
    from pgvector.psycopg.vector import register_vector_info

    connection.ensure_connection()
    raw = connection.connection
    info = _vector_types.get(raw)
    if info is None:
        info = _vector_types[raw] = psycopg.types.TypeInfo.fetch(raw, "vector")
    with psycopg.Cursor(raw) as cur:
        # This cursor only (Django's stay as they are); the function is typed for a
        # connection but registers on any adapter context.
        register_vector_info(cast(Any, cur), info)
        cur.execute(
            "UPDATE memory_memory AS m SET embedding = v.embedding,"
            " embedding_state = %s, embedding_error = '', embedded_at = %s"
            " FROM unnest(%s::bigint[], %b::vector[]) AS v(id, embedding)"
            " WHERE m.id = v.id",
            [
                EmbeddingState.READY,
                timezone.now(),
                list(ids),
                [np.asarray(v, dtype=np.float32) for v in vectors],
            ],
            prepare=False,  # planned each time, whatever plan_cache_mode says
        )


# The vector type's oids per database connection (fetched once for each).
_vector_types: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TaskRow:
    """What the embedding task needs of a row besides its text: where it belongs
    (org, session) and what it is (tier, kind, idempotency key), to enqueue the
    consolidation and index work after embedding without reading the rows again."""

    id: int
    org_id: int
    session_id: int | None
    tier: str
    kind: str
    idempotency_key: str | None


_TASK_ROW_FIELDS = ("id", "org_id", "session_id", "tier", "kind", "idempotency_key")


def coalesce_pending(ids: Sequence[int], *, limit: int) -> list[TaskRow]:
    """The rows ``ids`` plus the oldest other pending rows of the same orgs, up to
    ``limit``; ids of rows that no longer exist are dropped.

    A write of a few messages enqueues a task for just those rows; when writes arrive
    faster than the worker embeds, each task takes its backlog along, so the model runs
    on full batches and the later tasks find their rows ready. Such a task is a no-op
    (empty here): whoever embedded its rows enqueued their consolidation, and every
    other pending row has a task of its own queued (or the sweep gives it one). Rows of
    other orgs are never taken (the task's row-level-security scope is its rows' orgs).
    """
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    by_id, waiting = {}, False
    for *fields, state in (
        Memory.objects.filter(pk__in=ids)
        .order_by()
        .values_list(*_TASK_ROW_FIELDS, "embedding_state")
    ):
        by_id[fields[0]] = TaskRow(*fields)
        waiting = waiting or state != EmbeddingState.READY
    if not waiting:
        return []
    rows = [by_id[i] for i in ids if i in by_id]  # not empty: one of them waits
    room = limit - len(rows)
    if room <= 0:
        return rows
    return rows + pending_rows({r.org_id for r in rows}, exclude=ids, limit=room)


def pending_rows(
    orgs: set[int], *, exclude: Sequence[int], limit: int
) -> list[TaskRow]:
    """The oldest pending rows of ``orgs`` (not ``exclude``), at most ``limit``."""
    if limit <= 0:
        return []
    found = (
        Memory.objects.filter(org_id__in=orgs, embedding_state=EmbeddingState.PENDING)
        .exclude(pk__in=list(exclude))
        .order_by("recorded_at", "id")
        .values_list(*_TASK_ROW_FIELDS)[:limit]
    )
    return [TaskRow(*r) for r in found]


def memory_embed_failed(*, ids: Sequence[int], error: str) -> None:
    """Record an embedding failure on the rows (they stay searchable lexically)."""
    from django.db.models import F

    Memory.objects.filter(pk__in=ids).exclude(
        embedding_state=EmbeddingState.READY
    ).update(
        embedding_state=EmbeddingState.FAILED,
        embedding_error=error[:2000],
        embedding_attempts=F("embedding_attempts") + 1,
    )


def sweep_pending(*, older_than_seconds: int | None = None) -> int:
    """Re-enqueue rows left pending (or failed, under the attempt limit) too long."""
    age = (
        settings.MNEMO_PENDING_SWEEP_AFTER_SECONDS
        if older_than_seconds is None
        else older_than_seconds
    )
    cutoff = timezone.now() - timedelta(seconds=age)
    from django.db.models import Q

    ids = list(
        Memory.objects.filter(
            Q(embedding_state=EmbeddingState.PENDING)
            | Q(
                embedding_state=EmbeddingState.FAILED,
                embedding_attempts__lt=settings.MNEMO_EMBED_MAX_ATTEMPTS,
            ),
            recorded_at__lte=cutoff,
        )
        .order_by("id")
        .values_list("id", flat=True)[:50_000]
    )
    if ids:
        with transaction.atomic():
            enqueue_embedding(ids)
    return len(ids)


def kind_to_tier(kind: str) -> str | None:
    return TIER_OF_KIND.get(kind)


def team_in_org(team_id: int, org_id: int) -> bool:
    return Team.objects.filter(pk=team_id, org_id=org_id).exists()
