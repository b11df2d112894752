"""Celery tasks: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from celery import shared_task
from django.conf import settings
from django.db import transaction

from memory import services
from memory.models import Tier

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=None)
def embed_memories(self, ids: list[int]) -> int:  # type: ignore[no-untyped-def]
    """Embed rows ``ids``; on failure mark them failed and retry with backoff.

    The task takes the oldest other pending rows of the same orgs along, and while it
    runs it keeps taking those written since (``MNEMO_EMBEDDING_TASK_ROWS`` at a time,
    ``MNEMO_EMBEDDING_TASK_MAX_ROWS`` in all), so the model is not idle between tasks.
    """
    taken: list[services.TaskRow] = []
    try:
        rows = services.coalesce_pending(ids, limit=settings.MNEMO_EMBEDDING_TASK_ROWS)
        if not rows:
            return 0  # another task took these rows along
        taken.extend(rows)
        orgs = {r.org_id for r in rows}

        def refill() -> list[int]:
            room = min(
                settings.MNEMO_EMBEDDING_TASK_ROWS,
                settings.MNEMO_EMBEDDING_TASK_MAX_ROWS - len(taken),
            )
            more = services.pending_rows(
                orgs, exclude=[r.id for r in taken], limit=room
            )
            taken.extend(more)
            return [r.id for r in more]

        done = services.memory_embed(ids=[r.id for r in rows], refill=refill)
        ids = [r.id for r in taken]
        enqueue_consolidation(ids, rows=taken)
        request_index_sync(ids, orgs=orgs)
        return done
    except Exception as exc:
        ids = list(dict.fromkeys([*ids, *(r.id for r in taken)]))
        services.memory_embed_failed(ids=ids, error=f"{type(exc).__name__}: {exc}")
        if self.request.retries + 1 >= settings.MNEMO_EMBED_MAX_ATTEMPTS:
            logger.error("giving up embedding %d rows after retries: %s", len(ids), exc)
            return 0
        if self.request.is_eager:
            # Eager mode has no broker to delay a retry with; the sweep retries later.
            logger.warning("embedding failed (eager): %s; the sweep will retry", exc)
            return 0
        raise self.retry(
            exc=exc, countdown=min(300, 2 ** (self.request.retries + 1))
        ) from exc


INDEX_SYNC_LOCK = "mnemo:vector-index-sync-requested"
INDEX_SYNC_LOCK_S = 600


def request_index_sync(ids: list[int], orgs: set[int] | None = None) -> list[int]:
    """Enqueue a vector index sync when an org of the embedded rows ``ids`` (their
    ``orgs``, where the caller has them) has outgrown ``MNEMO_TENANT_HNSW_MIN_ROWS``
    without an index of its own; returns those orgs.

    At most one request per ``INDEX_SYNC_LOCK_S`` (cache lock; the sync builds every
    due org's indexes at once). Not with eager tasks (nothing is counted): the
    embedding then runs inside the web request's transaction, where ``CREATE INDEX
    CONCURRENTLY`` cannot run; there the beat task and ``manage.py vector_indexes``
    build them. A failure here never fails the embedding that already succeeded.
    """
    from django.core.cache import cache

    from memory.models import Memory
    from memory.vector_indexes import orgs_due

    if settings.CELERY_TASK_ALWAYS_EAGER:
        return []
    try:
        if orgs is None:
            orgs = set(
                Memory.objects.filter(pk__in=ids)
                .order_by()
                .values_list("org_id", flat=True)
                .distinct()
            )
        due = orgs_due(orgs)
        if due and cache.add(INDEX_SYNC_LOCK, 1, INDEX_SYNC_LOCK_S):
            sync_vector_indexes.delay()
            logger.info("orgs %s outgrew the index line: sync requested", due)
    except Exception as exc:  # noqa: BLE001 - an optimisation; the beat task is next
        logger.warning("could not check for a vector index sync: %s", exc)
        return []
    return due


@shared_task
def sweep_pending() -> int:
    """Periodic: re-enqueue rows stuck in pending (broker down, worker crash)."""
    return services.sweep_pending()


# --- knowledge tiers (issue 4) --------------------------------------------------


def enqueue_consolidation(
    ids: list[int], rows: Sequence[services.TaskRow] | None = None
) -> None:
    """After commit: consolidate the sessions of embedded messages, index written facts.

    Only raw rows trigger session consolidation (derived rows never re-trigger it), so
    embedding what consolidation wrote cannot loop. ``rows`` (the embedding task has
    them) saves reading the rows ``ids`` again. Off with
    ``MNEMO_CONSOLIDATION_ENABLED=False``.
    """
    if not getattr(settings, "MNEMO_CONSOLIDATION_ENABLED", True):
        return
    from memory.consolidation.service import (
        is_written_fact,
        sessions_to_consolidate,
        written_facts,
    )

    if rows is None:
        sessions = sessions_to_consolidate(ids)
        facts = written_facts(ids)
    else:
        sessions = list(
            dict.fromkeys(
                r.session_id
                for r in rows
                if r.tier == Tier.RAW and r.session_id is not None
            )
        )
        facts = [r.id for r in rows if is_written_fact(r)]

    delay = int(getattr(settings, "MNEMO_CONSOLIDATION_DELAY_S", 0))
    debounce = delay > 0 and not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)

    def send() -> None:
        try:
            for session_id in sessions:
                if not debounce:
                    consolidate_session.delay(session_id)
                elif _first_in_window(session_id, delay):
                    consolidate_session.apply_async((session_id,), countdown=delay)
            if facts:
                index_facts.delay(facts)
        except Exception as exc:  # noqa: BLE001 - a broker outage must not fail embedding
            logger.warning("could not enqueue consolidation (%s); re-run later", exc)

    transaction.on_commit(send)


def _first_in_window(session_id: int, delay: int) -> bool:
    """True for the first request to consolidate ``session_id`` in this window.

    The mark expires a second before the delayed run starts, so a write that lands
    while the run reads the session enqueues another run (consolidation is
    incremental and idempotent); nothing waits past one more window.
    """
    from django.core.cache import cache

    try:
        return bool(
            cache.add(f"mnemo:consolidate:{session_id}", 1, timeout=max(1, delay - 1))
        )
    except Exception:  # noqa: BLE001 - no cache: never skip a consolidation
        return True


@shared_task(acks_late=True)
def consolidate_session(
    session_id: int, full: bool = False
) -> dict[str, object] | None:
    """Consolidate one session (incremental unless ``full``); the run's stats."""
    from memory.consolidation.service import consolidate_session as run_consolidation

    run = run_consolidation(session_id, full=full)
    return None if run is None else {"run": run.pk, **run.stats}


@shared_task(acks_late=True)
def index_facts(ids: list[int]) -> list[int]:
    """Relationships and conflict detection for facts written through the API."""
    from memory.consolidation.service import index_written_facts

    return index_written_facts(ids)


@shared_task
def sync_vector_indexes() -> dict[str, int]:
    """Periodic: partial HNSW indexes for large tenants (memory/vector_indexes.py)."""
    from memory.vector_indexes import sync_tenant_indexes

    done = sync_tenant_indexes()
    return {
        "created": len(done.create),
        "dropped": len(done.drop),
        "shared_changed": int(done.shared_rebuild),  # MNEMO_SHARED_HNSW
    }


@shared_task
def refresh_drift() -> int:
    """Periodic: expire ``Entity.unstable`` flags older than the drift window."""
    from memory.conflicts import refresh_drift_all

    return refresh_drift_all()
