"""Row-level security: a query that forgets its org filter sees no other org."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from accounts import rls
from accounts.models import AuditEvent
from memory.models import Memory, Session
from memory.services import MemoryInput, memory_remember, session_create
from tests.conftest import World, client_for

pytestmark = pytest.mark.django_db


def _seed(world: World) -> None:
    for name, org in (("alice", world.acme), ("carol", world.globex)):
        principal = world.principal(name)
        session = session_create(principal=principal, external_id=f"s-{name}")
        memory_remember(
            principal=principal,
            session=session,
            items=[
                MemoryInput(
                    content=f"{name} likes tea",
                    tier="raw",
                    kind="message",
                    visibility="org",
                )
            ],
        )
        assert Memory.objects.filter(org=org).exists()


def _raw_count(table: str, org_id: int | None = None) -> int:
    with connection.cursor() as cursor:
        if org_id is None:
            cursor.execute(f"SELECT count(*) FROM {table}")
        else:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE org_id = %s", [org_id])
        return int(cursor.fetchone()[0])


def test_every_table_with_an_org_column_has_a_tenant_policy() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.relrowsecurity,
                   EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'r'
              AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                          AND a.attname = 'org_id' AND NOT a.attisdropped)
            """
        )
        rows = cursor.fetchall()
    exempt = {
        "accounts_team",
        "accounts_membership",
        "accounts_agent",
        "accounts_apikey",
    }
    unprotected = [
        name for name, on, policy in rows if name not in exempt and not (on and policy)
    ]
    assert rows and unprotected == []


def test_the_application_role_owns_nothing_and_cannot_bypass_rls() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles "
            "WHERE rolname = current_user"
        )
        user, superuser, bypass = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
            "AND tableowner = current_user"
        )
        owned = cursor.fetchone()[0]
    assert user == "mnemo_app"
    assert (superuser, bypass, owned) == (False, False, 0)


def test_raw_unfiltered_query_inside_a_request_returns_only_the_callers_org(
    world: World, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.security.urls_probe"
    _seed(world)
    body = client_for(world, "agent_a").get("/probe/raw").json()
    assert body["role"] == {"mnemo_app": 1}
    assert body["memory_memory"].get(str(world.acme.pk), 0) > 0
    for table in ("memory_memory", "memory_session", "memory_entity"):
        assert str(world.globex.pk) not in body[table], table
    globex = client_for(world, "carol").get("/probe/raw").json()
    assert str(world.acme.pk) not in globex["memory_memory"]
    assert globex["memory_memory"].get(str(world.globex.pk), 0) > 0


def test_a_request_without_a_principal_sees_no_tenant_rows(
    world: World, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.security.urls_probe"
    _seed(world)
    body = client_for(world, "anonymous").get("/probe/raw").json()
    assert all(body[t] == {} for t in ("memory_memory", "memory_session"))


def test_a_fresh_session_scope_sees_nothing_until_an_org_is_set(world: World) -> None:
    _seed(world)
    with transaction.atomic():
        rls.apply_scope(rls.NONE)
        assert _raw_count("memory_memory") == 0
        rls.apply_scope(rls.ORG, [world.globex.pk])
        assert _raw_count("memory_memory") == _raw_count(
            "memory_memory", world.globex.pk
        )
        assert _raw_count("memory_memory", world.acme.pk) == 0
        assert (
            _raw_count("memory_memory_derived_from") >= 0
        )  # link tables follow parents


def test_writing_a_row_into_another_org_is_refused_by_the_database(
    world: World,
) -> None:
    _seed(world)
    with (
        pytest.raises(DatabaseError, match="row-level security"),
        rls.scoped([world.acme.pk]),
    ):
        Session.objects.create(org=world.globex, external_id="smuggled")


def test_a_task_is_scoped_to_the_org_of_its_ids(world: World) -> None:
    _seed(world)
    ids = list(Memory.objects.filter(org=world.acme).values_list("id", flat=True))

    class FakeTask:
        name = "memory.tasks.embed_memories"

    with transaction.atomic():
        rls.apply_scope(rls.NONE)  # a worker's session starts with nothing visible
        rls._task_scope(task=FakeTask(), args=[ids], kwargs={})
        assert _raw_count("memory_memory", world.globex.pk) == 0
        assert _raw_count("memory_memory") == len(ids)
        rls._task_unscope()
        transaction.set_rollback(True)


def test_the_audit_log_is_append_only_for_the_application_role(world: World) -> None:
    AuditEvent.objects.create(org=world.acme, actor="system", action="test")
    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
        AuditEvent.objects.filter(org=world.acme).update(action="rewritten")
    with (
        pytest.raises(DatabaseError, match="permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM accounts_auditevent")


def _scope_statements(queries: list[dict[str, Any]]) -> list[str]:
    return [q["sql"] for q in queries if "mnemo.scope" in q["sql"]]


@pytest.mark.django_db(transaction=True)
def test_a_request_on_a_session_opened_in_scope_none_skips_setting_it_again(
    world: World, settings: Any
) -> None:
    """A web process's sessions open in scope none: its request transaction starts
    there without a round trip, still sees no tenant rows, and sets the scope again
    once anything changed it at session level (a change a rollback could undo)."""
    from django.test.utils import CaptureQueriesContext

    from config.db import roles

    settings.ROOT_URLCONF = "tests.security.urls_probe"
    _seed(world)
    previous = roles.default_scope()
    roles.set_default_scope(rls.NONE, reason="test: a web process")
    connection.close()  # the next session opens in scope none, as a web worker's does
    try:
        anonymous = client_for(world, "anonymous")
        with CaptureQueriesContext(connection) as first:
            body = anonymous.get("/probe/raw").json()
        assert _scope_statements(first.captured_queries) == []
        assert all(body[t] == {} for t in ("memory_memory", "memory_session"))
        assert connection.mnemo_session_scope == (rls.NONE, ())

        # An agent's request narrows to its org as before (no extra statement first).
        with CaptureQueriesContext(connection) as agent:
            body = client_for(world, "agent_a").get("/probe/raw").json()
        assert len(_scope_statements(agent.captured_queries)) == 1
        assert body["memory_memory"].get(str(world.acme.pk), 0) > 0
        assert str(world.globex.pk) not in body["memory_memory"]

        # A session-level change: the session's scope is unknown from here on.
        rls.apply_scope(rls.SYSTEM, local=False)
        assert connection.mnemo_session_scope is None
        with CaptureQueriesContext(connection) as after:
            body = anonymous.get("/probe/raw").json()
        assert len(_scope_statements(after.captured_queries)) == 1
        assert all(body[t] == {} for t in ("memory_memory", "memory_session"))
    finally:
        roles.set_default_scope(previous, reason="test process")
        connection.close()
