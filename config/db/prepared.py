"""``lookup_rows``: statements whose plan never depends on their values, planned once
per connection.

Statements that look rows up by key (the API key by its prefix; hydration,
neighbours, speakers, the citations' lineage and the open-conflict probe by id; the
store probe's EXISTS and counts; term statistics by org) run as named prepared
statements with generic plans: their plan does not depend on the values (a primary-key,
prefix or (session, seq) lookup, then the scope's filters), and planning a statement
on memory_memory costs more than running it, for it proves every partial index's
predicate (two dozen at 100k rows, ~90 at 1M). PostgreSQL keeps choosing custom plans
for them by its own cost rule (docs/benchmarks.md, session 14), so connections start
with ``plan_cache_mode = force_generic_plan`` (config/db/base.py).

It touches only statements prepared on purpose, i.e. these: Django's cursors bind on
the client and never prepare, and the worker's vector store says prepare=False. Not
for a statement that must match a tenant's partial index (``WHERE org_id = 7``): a
generic plan sees ``org_id = $1`` and cannot use it (the vector and lexical channels).
``MNEMO_RECALL_GENERIC_PLANS=0`` runs them all through Django's cursor (for a
connection pooler without named prepared statements).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection


def lookup_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Rows of a key-looked-up statement, through a prepared generic plan when
    enabled."""
    if not settings.MNEMO_RECALL_GENERIC_PLANS:
        with connection.cursor() as c:
            c.execute(sql, params)
            return c.fetchall()
    connection.ensure_connection()
    started = time.monotonic()
    # Errors surface as Django's (the middleware answers 503 to OperationalError).
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cur:
        cur.execute(sql, params, prepare=True)
        rows = cur.fetchall()
    if connection.queries_logged:  # as Django's cursors log (query-count tests)
        took = time.monotonic() - started
        connection.queries_log.append({"sql": sql, "time": f"{took:.3f}"})
    return rows
