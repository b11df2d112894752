"""Per-org, per-tier document frequencies of full-text lexemes (lexical IDF).

In a tenant of more rows than the lexical channel's candidate cap, recall must know
which query terms are rare (they find candidates) and how common the others are (their
IDF). Counting that at query time meant, per term, a bitmap scan of the shared GIN
index and a heap visit to every matching row of every org until the count reached the
"common" threshold: at 1M rows, with a 220k-row tenant, that was the largest part of
the phase-2 lexical stage (docs/benchmarks.md, session 7).

``refresh`` counts them once per org with ``unnest(tsvector)`` into
:class:`recall.models.TermFrequency`; recall reads the query's handful of lexemes by
primary key. The counts are over the org's *active* rows of each tier, whatever their
visibility: an upper bound of what any principal of the org may see. They decide
which terms probe and estimate the IDF of terms whose rows do not all fit among the
candidates; where they all fit, the channel still counts each term over the eligible
candidates exactly. Rows and text never cross teams; what the org-wide counts can
reveal to a member is aggregate term statistics (docs/security.md).

Orgs under ``min_rows`` active rows get no statistics (their lexical channel counts
every match among candidates anyway). Refresh from ``manage.py term_stats`` or the
hourly beat task; both are idempotent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.db.arrays import TextArray
from config.db.prepared import lookup_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Frequencies:
    """One org's counts for some query terms, summed over the tiers asked for."""

    df: dict[str, int]  # query term -> rows holding its lexeme (0: none then)
    rows: int  # active rows of those tiers when counted


def _active_rows() -> dict[int, int]:
    with connection.cursor() as c:
        c.execute(
            "SELECT org_id, count(*) FROM memory_memory WHERE status = 'active' "
            "GROUP BY org_id"
        )
        return {int(org): int(n) for org, n in c.fetchall()}


def refresh(
    org_ids: Sequence[int] | None = None, *, min_rows: int | None = None
) -> dict[int, float]:
    """Recount the term frequencies of ``org_ids`` (default: every org with at least
    ``min_rows`` active rows; orgs that fell under it lose theirs). Returns the
    seconds each recount took. Runs in the maintenance ("system") scope of workers and
    management commands, which sees every org's rows.
    """
    from recall.models import TermFrequency, TermStats

    threshold = int(
        settings.MNEMO_TERM_STATS_MIN_ROWS if min_rows is None else min_rows
    )
    done: dict[int, float] = {}
    if org_ids is None:
        org_ids = sorted(o for o, n in _active_rows().items() if n >= threshold)
        stale = TermStats.objects.exclude(org_id__in=org_ids)
        TermFrequency.objects.filter(org_id__in=stale.values("org_id")).delete()
        stale.delete()
    for org in org_ids:
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as c:
            c.execute("SET LOCAL statement_timeout = 0")
            c.execute("DELETE FROM recall_termfrequency WHERE org_id = %s", [org])
            c.execute(
                "INSERT INTO recall_termfrequency (org_id, tier, term, df) "
                "SELECT m.org_id, m.tier, u.lexeme, count(*) "
                "FROM memory_memory m, unnest(m.search) AS u "
                "WHERE m.org_id = %s AND m.status = 'active' "
                "GROUP BY m.org_id, m.tier, u.lexeme",
                [org],
            )
            c.execute(
                "SELECT tier, count(*) FROM memory_memory "
                "WHERE org_id = %s AND status = 'active' GROUP BY tier",
                [org],
            )
            tiers = {str(t): int(n) for t, n in c.fetchall()}
            seconds = round(time.perf_counter() - started, 3)
            TermStats.objects.update_or_create(
                org_id=org,
                defaults={
                    "tier_rows": tiers,
                    "refreshed_at": timezone.now(),
                    "seconds": seconds,
                },
            )
        done[org] = seconds
        logger.info("term stats of org %s: %s rows in %.1fs", org, tiers, seconds)
    return done


def lookup(
    org_id: int, tiers: Sequence[str], terms: Sequence[str]
) -> Frequencies | None:
    """The counted frequencies of ``terms`` in ``tiers`` of ``org_id``, or None when
    the org has no statistics. One statement: the org's marker row and the terms'
    lexemes (``to_tsvector('english', term)``, as the index holds them).

    A term whose lexeme was not there when counted has df 0 (it may be new since); a
    term without a lexeme (a stop word) is left out.
    """
    if not terms:
        return Frequencies({}, 0)
    got = lookup_rows(
        "SELECT t, coalesce((SELECT sum(f.df) FROM recall_termfrequency f "
        "  WHERE f.org_id = s.org_id AND f.tier = ANY(%s) "
        "    AND f.term = l.lexeme), 0), "
        " (SELECT coalesce(sum(value::int), 0) FROM jsonb_each_text(s.tier_rows) "
        "  WHERE key = ANY(%s)), l.lexeme IS NOT NULL "
        "FROM recall_termstats s CROSS JOIN unnest(%s::text[]) AS t "
        "LEFT JOIN LATERAL (SELECT min(x.lexeme) AS lexeme "
        "  FROM unnest(to_tsvector('english', t)) AS x) l ON true "
        "WHERE s.org_id = %s",
        [TextArray(tiers), TextArray(tiers), TextArray(terms), org_id],
    )
    if not got:
        return None
    return Frequencies({t: int(df) for t, df, _, has in got if has}, int(got[0][2]))
