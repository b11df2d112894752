"""A recall's own transaction commits without waiting for a disk flush (it writes only
its RecallEvent); a transaction that already wrote anything keeps durable commits."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from memory import services
from memory.models import Memory
from memory.services import MemoryInput
from recall.models import RecallEvent
from recall.services import recall_run
from recall.types import RecallRequest


def _synchronous_commit() -> str:
    with connection.cursor() as c:
        c.execute("SHOW synchronous_commit")
        return str(c.fetchone()[0])


def _remember(principal, text: str) -> None:
    services.memory_remember(
        principal=principal, items=[MemoryInput(content=text)], enqueue=False
    )


@pytest.mark.django_db(transaction=True)
def test_a_read_only_recall_transaction_commits_asynchronously_and_keeps_its_event(
    world,
):
    alice = world.principal("alice")
    _remember(alice, "The pottery workshop is on Tuesday")
    assert _synchronous_commit() == "on"
    with transaction.atomic():
        pack = recall_run(alice, RecallRequest(query="pottery workshop"))
        assert _synchronous_commit() == "off"
    # The setting was local to that transaction, and its event was committed.
    assert _synchronous_commit() == "on"
    assert RecallEvent.objects.filter(pk=pack.recall_id).exists()
    # Outside any transaction the event gets a transaction of its own.
    pack = recall_run(alice, RecallRequest(query="pottery workshop"))
    assert RecallEvent.objects.filter(pk=pack.recall_id).exists()
    assert _synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
def test_a_transaction_that_wrote_a_memory_keeps_durable_commits(world):
    alice = world.principal("alice")
    with transaction.atomic():
        _remember(alice, "The pottery workshop moved to Thursday")
        recall_run(alice, RecallRequest(query="pottery workshop"))
        assert _synchronous_commit() == "on"
    assert Memory.objects.filter(content__contains="Thursday").exists()


@pytest.mark.django_db(transaction=True)
def test_a_recall_without_an_event_changes_nothing(world):
    alice = world.principal("alice")
    _remember(alice, "The pottery workshop is on Tuesday")
    with transaction.atomic():
        recall_run(alice, RecallRequest(query="pottery", record_event=False))
        assert _synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
def test_the_playground_audit_commits_durably(world):
    from accounts.principals import Principal
    from ui.playground import playground_run

    alice = world.principal("alice")
    _remember(alice, "The pottery workshop is on Tuesday")
    with transaction.atomic():
        pack = playground_run(
            admin=world.principal("olivia"),
            user=world.olivia,
            as_principal=Principal.for_agent(world.agent_a),
            request=RecallRequest(query="pottery workshop"),
        )
        assert _synchronous_commit() == "on"
    event = RecallEvent.objects.get(pk=pack.recall_id)
    assert event.params["playground"]["username"] == "olivia"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strict", [False, True])
def test_inside_a_transaction_the_store_probe_sets_it_without_a_round_trip(
    world, strict
):
    from django.test.utils import CaptureQueriesContext

    alice = world.principal("alice")
    _remember(alice, "The pottery workshop is on Tuesday")
    services.memory_embed(ids=list(Memory.objects.values_list("pk", flat=True)))
    with transaction.atomic(), CaptureQueriesContext(connection) as q:
        pack = recall_run(alice, RecallRequest(query="pottery workshop", strict=strict))
        assert _synchronous_commit() == "off"
    setting = [s["sql"] for s in q if "synchronous_commit" in s["sql"]]
    assert len(setting) == 2  # the one that sets it, and SHOW above
    # A strict recall can still fail after the probe, so it sets it on its own, just
    # before the event; any other recall does it in the probe's round trip.
    assert ("hnsw.ef_search" in setting[0]) is not strict
    assert RecallEvent.objects.filter(pk=pack.recall_id).exists()
