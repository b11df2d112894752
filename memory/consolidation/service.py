"""Consolidation of a session: messages -> observations -> facts/procedures -> episodes
-> topics, then entity resolution, conflict detection and drift. One service, run by a
background task after embedding; idempotent and incremental (a cursor per session).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from memory.consolidation.extractors import RuleExtractor, extractor_for_org
from memory.consolidation.facts import extract_facts
from memory.consolidation.statements import Written, fact_group
from memory.consolidation.types import Extraction, MessageView, ObservationDraft
from memory.consolidation.writer import advisory_lock
from memory.models import (
    ConsolidationRun,
    Memory,
    Relationship,
    RunStatus,
    Session,
    Status,
    Tier,
)

logger = logging.getLogger(__name__)


def _view(m: Memory) -> MessageView:
    return MessageView(
        id=m.pk,
        content=m.content,
        speaker=m.speaker,
        role=m.role,
        occurred_at=m.occurred_at,
        seq=m.seq,
    )


def session_cursor(session_id: int) -> int | None:
    """The highest message ``seq`` already consolidated in the session."""
    return ConsolidationRun.objects.filter(
        session_id=session_id, finished_at__isnull=False
    ).aggregate(cursor=Max("cursor_seq"))["cursor"]


def consolidate_session(
    session_id: int, *, full: bool = False
) -> ConsolidationRun | None:
    """Consolidate the session's messages not yet seen (all of them with ``full``).

    Extraction (possibly an LLM call) runs outside any transaction; the writes run in
    one, under the session's advisory lock, and skip every row whose idempotency key
    exists - so re-running, or two workers racing, never duplicates a derived row.
    """
    from memory import conflicts, entities, resolution, services
    from memory.consolidation import episodes, topics
    from memory.consolidation.statements import store_extraction

    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return None
    started = time.perf_counter()
    cursor = None if full else session_cursor(session_id)
    messages = list(
        Memory.objects.filter(
            session_id=session_id,
            tier=Tier.RAW,
            status=Status.ACTIVE,
            kind="message",
            **({"seq__gt": cursor} if cursor else {}),
        )
        # Not the vectors: nothing here reads them, and each is 384 floats to parse.
        .defer("embedding")
        .order_by("seq", "id")
    )
    if not messages:
        return None
    extractor = extractor_for_org(session.org_id)
    extraction = extractor.extract([_view(m) for m in messages])
    now = timezone.now()
    with transaction.atomic():
        advisory_lock("consolidate", session_id)
        written = store_extraction(extraction, messages, now)
        episode_ids = episodes.build_episodes(session_id, after_seq=cursor, now=now)
        entities.extract_and_link(ids=episode_ids)
        conflict_ids = conflicts.conflicts_detect(written.relationships, now=now)
        resolution.entities_resolve(session.org_id, written.entities)
        topic_ids = topics.refresh_topics(session.org_id, _subjects(written), now)
        run = ConsolidationRun.objects.create(
            org_id=session.org_id,
            session=session,
            extractor=extraction.extractor,
            status=RunStatus.FALLBACK if extraction.fell_back else RunStatus.OK,
            cursor_seq=max(m.seq or 0 for m in messages),
            errors=extraction.errors,
            started_at=now,
            finished_at=timezone.now(),
            stats={
                "messages": len(messages),
                "observations": len(written.observations),
                "facts": len(written.facts),
                "procedures": len(written.procedures),
                "relationships": len(written.relationships),
                "episodes": len(episode_ids),
                "topics": len(topic_ids),
                "conflicts": len(conflict_ids),
                "tokens": extraction.tokens_used,
                "seconds": round(time.perf_counter() - started, 3),
            },
        )
        services.enqueue_embedding([*written.new_memory_ids, *episode_ids, *topic_ids])
    if extraction.errors:
        logger.warning(
            "consolidation of session %s fell back: %s",
            session_id,
            extraction.errors[0]["error"],
        )
    return run


def _subjects(written: Written) -> list[int]:
    return list(
        Relationship.objects.filter(pk__in=written.relationships)
        .values_list("subject_id", flat=True)
        .distinct()
    )


def index_written_facts(ids: Sequence[int]) -> list[int]:
    """Facts written directly (API / agents): relationships + conflict detection.

    A ``semantic``/``fact`` row that consolidation did not write, and that states no
    relationship yet, is read with the fact rules as its own observation.
    """
    from memory import conflicts
    from memory.consolidation.statements import _relationship
    from memory.consolidation.writer import DerivedRow, scope_of
    from memory.entities import entities_for_names

    rows = list(
        Memory.objects.filter(
            pk__in=ids,
            tier=Tier.SEMANTIC,
            kind="fact",
            status=Status.ACTIVE,
            relationships__isnull=True,
        ).exclude(idempotency_key__startswith="consolidate:")
    )
    rels: list[Relationship] = []
    for m in rows:
        if old := m.metadata.get("supersedes"):
            # A correction (memory_supersede): the old statement's relationships end.
            Relationship.objects.filter(statement_id=old, status=Status.ACTIVE).update(
                status=Status.SUPERSEDED, superseded_at=m.recorded_at
            )
        obs = ObservationDraft(m.pk, 0, m.content, 0, len(m.content), m.speaker)
        for f in extract_facts(obs)[:1]:
            names = [(f.subject, f.subject_type), (f.object, f.object_type)]
            found = entities_for_names(m.org_id, names)
            row = DerivedRow(
                key="",
                tier=m.tier,
                kind=m.kind,
                content=m.content,
                scope=scope_of(m),
                sources=[],
                speaker=m.speaker,
                valid_from=m.valid_from,
                valid_to=m.valid_to,
                metadata={"semantic_group": fact_group(f)},
            )
            rel = _relationship(m.org_id, f, row, m.pk, found, timezone.now())
            rel.save()
            rel.evidence.add(m, *m.derived_from.all())
            rels.append(rel)
    return conflicts.conflicts_detect([r.pk for r in rels]) if rels else []


def sessions_to_consolidate(ids: Iterable[int]) -> list[int]:
    """The sessions whose raw messages are among the embedded rows ``ids``."""
    return list(
        Memory.objects.filter(pk__in=list(ids), tier=Tier.RAW, session__isnull=False)
        .order_by()
        .values_list("session_id", flat=True)
        .distinct()
    )


CONSOLIDATION_KEY_PREFIX = "consolidate:"


def written_facts(ids: Iterable[int]) -> list[int]:
    """Facts among ``ids`` that were written directly, not by consolidation."""
    return list(
        Memory.objects.filter(pk__in=list(ids), tier=Tier.SEMANTIC, kind="fact")
        .exclude(idempotency_key__startswith=CONSOLIDATION_KEY_PREFIX)
        .values_list("id", flat=True)
    )


def is_written_fact(row: Any) -> bool:
    """:func:`written_facts`' test on one row already read (``tier``, ``kind``,
    ``idempotency_key``)."""
    return (
        row.tier == Tier.SEMANTIC
        and row.kind == "fact"
        and not (row.idempotency_key or "").startswith(CONSOLIDATION_KEY_PREFIX)
    )


def rule_extract(messages: Sequence[MessageView]) -> Extraction:
    """The default extractor as a function (benchmarks, tests)."""
    return RuleExtractor().extract(messages)
