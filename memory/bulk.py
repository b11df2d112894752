"""``insert_memories``: many new ``Memory`` rows in one fixed statement.

``Memory.objects.bulk_create`` compiles its ``INSERT`` field by field (35 columns a
row), and psycopg then splits the ~350-placeholder text on every call: it caches
the split only for statements of at most 50 parameters and 4 KiB. For a POST of 10
messages that was ~3 ms of the web process's ~10.5 ms of CPU (docs/benchmarks.md,
session 34). Here the rows travel as one JSON array and PostgreSQL turns it into
``memory_memory`` records (``jsonb_populate_recordset``): the statement's text is
the same for any number of rows, so psycopg's cache keeps its split, and the server
parses one short statement.

What it inserts is what ``bulk_create`` inserts: every concrete column but the
primary key and the generated full-text column, with the values the model instance
holds (its field defaults included). Row-level security applies as to any insert.
The instances get their primary keys, in order, as ``bulk_create`` gives them.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection

from memory.models import Memory


@functools.cache
def _columns() -> tuple[tuple[str, str], ...]:
    """(attribute, column) of every column an insert writes."""
    return tuple(
        (f.attname, f.column)
        for f in Memory._meta.concrete_fields
        if not f.primary_key and not getattr(f, "generated", False)
    )


@functools.cache
def _sql() -> str:
    names = ", ".join(connection.ops.quote_name(c) for _, c in _columns())
    return (
        f"INSERT INTO {Memory._meta.db_table} ({names}) "  # noqa: S608 - model metadata
        f"SELECT {names} FROM jsonb_populate_recordset(NULL::{Memory._meta.db_table}, "
        "%s::jsonb) AS r RETURNING id"
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.date):  # datetimes too
        return value.isoformat()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "to_list"):  # pgvector's Vector
        return value.to_list()
    return value


def insert_memories(rows: Sequence[Memory]) -> list[Memory]:
    """Insert new ``rows`` in one statement; returns them with their ids set."""
    if not rows:
        return []
    payload = json.dumps(
        [
            {column: _json_value(getattr(m, attname)) for attname, column in _columns()}
            for m in rows
        ],
        separators=(",", ":"),
    )
    with connection.cursor() as c:
        c.execute(_sql(), [payload])
        ids = [pk for (pk,) in c.fetchall()]
    if len(ids) != len(rows):  # an insert of N rows returns N ids or raises
        raise RuntimeError(f"inserted {len(ids)} of {len(rows)} memories")
    for m, pk in zip(rows, ids, strict=True):
        m.pk = pk
        m._state.adding = False
        m._state.db = connection.alias
    return list(rows)
