"""``memory.bulk.insert_memories`` stores what ``bulk_create`` stores."""

from __future__ import annotations

import datetime

import numpy as np
import pytest
from django.db import connection

from memory.bulk import _columns, insert_memories
from memory.models import Memory, Session

UTC = datetime.UTC


def _rows(world, session, tag: str) -> list[Memory]:
    when = datetime.datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    return [
        Memory(
            org=world.acme,
            session=session,
            seq=1,
            tier="raw",
            kind="message",
            content=f'Rosa\'s "quoted" line, naïve café \\ {tag}',
            context="before: it's [1, 2]",
            role="user",
            speaker="Rosa",
            metadata={"nested": {"a": [1, 2.5, None, "x"]}, "flag": True},
            content_sha256="0" * 64,
            idempotency_key=f"key-{tag}",
            occurred_at=when,
            valid_from=when - datetime.timedelta(days=400),
            valid_to=None,
            recorded_at=when,
            source_span={"start": 3, "end": 9},
            external_ref="ext/1",
            confidence=0.375,
            env_tags=["prod", "eu-west"],
            keywords=["pottery", "it's"],
            visibility="team",
            team=world.team_a,
            owner_agent=world.agent_a,
            embedding=vector,
            embedding_state="ready",
            embedded_at=when,
        ),
        # defaults everywhere the write path leaves them; JSON null and empty arrays
        Memory(
            org=world.acme,
            tier="knowledge",
            kind="fact",
            content=f"plain {tag}",
            content_sha256="1" * 64,
            source_span=None,
            recorded_at=when,  # its default is the time of construction
        ),
    ]


def _stored(ids: list[int]) -> list[dict]:
    names = [a for a, _ in _columns()]
    by_id = {r["id"]: r for r in Memory.objects.filter(pk__in=ids).values("id", *names)}
    out = []
    for pk in ids:
        row = dict(by_id[pk])
        row.pop("id")
        for key in ("content", "idempotency_key", "seq"):
            row.pop(key)
        row["embedding"] = (
            None if row["embedding"] is None else np.asarray(row["embedding"]).tolist()
        )
        out.append(row)
    return out


@pytest.mark.django_db
def test_insert_memories_stores_every_column_as_bulk_create_does(world):
    session = Session.objects.create(org=world.acme, external_id="bulk")
    orm = Memory.objects.bulk_create(_rows(world, session, "orm"))
    orm_ids = [m.pk for m in orm]
    ours = _rows(world, session, "ours")
    ours[0].seq = 2
    got = insert_memories(ours)
    assert got is not None and [m.pk for m in got] == [m.pk for m in ours]
    assert all(m.pk and not m._state.adding for m in ours)
    assert _stored([m.pk for m in ours]) == _stored(orm_ids)
    # each id is its own row, in order
    stored = dict(
        Memory.objects.filter(pk__in=[m.pk for m in ours]).values_list("id", "content")
    )
    assert [stored[m.pk] for m in ours] == [m.content for m in ours]
    # JSON null is SQL NULL (as Django stores None), and the generated column is set
    with connection.cursor() as c:
        c.execute(
            "SELECT id, source_span IS NULL, valid_to IS NULL, search::text "
            "FROM memory_memory WHERE id = ANY(%s) ORDER BY id",
            [[*orm_ids, *(m.pk for m in ours)]],
        )
        rows = c.fetchall()
    assert [r[1] for r in rows] == [False, True, False, True]
    assert all(r[2] for r in rows)
    assert all("rosa" in r[3] or "plain" in r[3] for r in rows)


@pytest.mark.django_db
def test_insert_memories_of_nothing_runs_no_statement(world, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert insert_memories([]) == []


@pytest.mark.django_db
def test_a_failing_insert_writes_none_of_the_rows(world):
    """All or nothing: the second row reuses the first's idempotency key."""
    from django.db import IntegrityError, transaction

    session = Session.objects.create(org=world.acme, external_id="bulk-fail")
    first, second = _rows(world, session, "x")
    second.idempotency_key = first.idempotency_key
    before = Memory.objects.count()
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_memories([first, second])
    assert Memory.objects.count() == before
