"""Celery tasks: thin wrappers that take ids and call one service."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from memory import services

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=None)
def embed_memories(self, ids: list[int]) -> int:  # type: ignore[no-untyped-def]
    """Embed rows ``ids``; on failure mark them failed and retry with backoff."""
    try:
        return services.memory_embed(ids=ids)
    except Exception as exc:
        services.memory_embed_failed(ids=ids, error=f"{type(exc).__name__}: {exc}")
        if self.request.retries + 1 >= settings.MNEMO_EMBED_MAX_ATTEMPTS:
            logger.error("giving up embedding %d rows after retries: %s", len(ids), exc)
            return 0
        if self.request.is_eager:
            # Eager mode has no broker to delay a retry with; the sweep retries later.
            logger.warning("embedding failed (eager): %s; the sweep will retry", exc)
            return 0
        raise self.retry(exc=exc, countdown=min(300, 2 ** (self.request.retries + 1))) from exc


@shared_task
def sweep_pending() -> int:
    """Periodic: re-enqueue rows stuck in pending (broker down, worker crash)."""
    return services.sweep_pending()
