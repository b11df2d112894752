"""Background jobs of recall: each takes ids and calls one service."""

from __future__ import annotations

from celery import shared_task

from recall.communities import communities_recompute as _recompute


@shared_task(acks_late=True)
def communities_recompute(org_id: int) -> int:
    """Recompute the entity communities of one organization."""
    return _recompute(org_id)


@shared_task
def communities_recompute_all() -> int:
    """Fan out one recompute per organization (for the beat schedule)."""
    from accounts.models import Organization

    ids = list(Organization.objects.values_list("id", flat=True))
    for org_id in ids:
        communities_recompute.delay(org_id)
    return len(ids)


@shared_task
def refresh_term_stats() -> dict[str, float]:
    """Periodic: recount the full-text term frequencies of large orgs."""
    from recall import term_stats

    return {str(org): s for org, s in term_stats.refresh().items()}
