"""Partial HNSW indexes for large tenants: built, used by the planner, same answers."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from memory import services, vector_indexes
from recall import channels
from recall.scope import Scope
from recall.types import PHASE_TIERS

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = [
    "The quarterly budget review moved to Thursday.",
    "Lena prefers tea over coffee in the mornings.",
    "Deploy the billing service after the database migration.",
    "The Lisbon office opens in March next year.",
    "Our retro found that flaky tests slow every release.",
    "Marco is allergic to peanuts; order lunch accordingly.",
]


def _stock(principal, texts):
    result = services.memory_remember(
        principal=principal,
        items=[services.MemoryInput(content=t) for t in texts],
        enqueue=False,
    )
    services.memory_embed(ids=[m.pk for m in result.memories])


@pytest.fixture
def cleanup_indexes(settings):
    # Start from what the migrations built, whatever ran before.
    default = settings.MNEMO_SHARED_HNSW
    settings.MNEMO_SHARED_HNSW = "full"
    vector_indexes.sync_tenant_indexes(min_rows=10**9)
    settings.MNEMO_SHARED_HNSW = default  # this run's setting, for the test
    yield
    from config.db import roles

    with roles.owner_mode(connection), connection.cursor() as c:
        for org in vector_indexes.existing() | vector_indexes.invalid():
            for name in vector_indexes._names(org).values():
                c.execute(f"DROP INDEX IF EXISTS {name}")
    # Back to what the migrations built: the shared index over every row.
    settings.MNEMO_SHARED_HNSW = "full"
    vector_indexes.sync_tenant_indexes(min_rows=10**9)
    assert vector_indexes.shared_excluded() == set()


def _vector_ids(principal, query):
    from memory import embeddings

    vec = embeddings.embed_queries([query])[0]
    scope = Scope(principal=principal, tiers=("raw",))
    with transaction.atomic():
        channels.set_vector_search_params()
        return [h.memory_id for h in channels.vector_channel(scope, vec, k=4)]


def _plan(principal, query, tiers=("raw",)):
    from memory import embeddings

    vec = embeddings.embed_queries([query])[0]
    v = "[" + ",".join(f"{x:.6f}" for x in vec.tolist()) + "]"
    where, params = channels.eligibility_sql(Scope(principal=principal, tiers=tiers))
    with transaction.atomic(), connection.cursor() as c:
        # A tiny table is cheaper to scan exactly; make the planner pick an index.
        c.execute("SET LOCAL enable_seqscan = off")
        c.execute("SET LOCAL enable_bitmapscan = off")
        c.execute("SET LOCAL enable_sort = off")
        c.execute(
            f"EXPLAIN SELECT m.id FROM memory_memory m WHERE {where} "
            "ORDER BY m.embedding <=> %s::vector LIMIT 4",
            [*params, v],
        )
        return "\n".join(r[0] for r in c.fetchall())


def _lexical_plan(principal, term):
    where, params = channels.eligibility_sql(Scope(principal=principal, tiers=("raw",)))
    with transaction.atomic(), connection.cursor() as c:
        # A tiny table: make the planner pick a bitmap over some index.
        c.execute("SET LOCAL enable_seqscan = off")
        c.execute("SET LOCAL enable_indexscan = off")
        c.execute(
            f"EXPLAIN SELECT m.id FROM memory_memory m WHERE {where} "
            "AND m.search @@ to_tsquery('english', %s)",
            [*params, term],
        )
        return "\n".join(r[0] for r in c.fetchall())


def test_large_tenant_gets_its_own_index_and_the_same_answers(
    world, cleanup_indexes, settings
):
    settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS = 5
    acme, globex = world.principal("agent_a"), world.principal("agent_globex")
    _stock(acme, TEXTS)
    _stock(globex, TEXTS[:2])
    query = "when does the new office open?"
    before = _vector_ids(acme, query)

    todo = vector_indexes.sync_tenant_indexes(min_rows=5)

    assert [org for org, _ in todo.create] == [world.acme.pk]
    assert todo.create[0][1] == len(TEXTS)
    assert vector_indexes.existing() == {world.acme.pk}
    assert _vector_ids(acme, query) == before  # same rows, same order
    assert vector_indexes.index_name(world.acme.pk) in _plan(acme, query)
    # Its own full-text index too; Globex has neither: it never reads Acme's.
    assert vector_indexes.gin_index_name(world.acme.pk) in _lexical_plan(acme, "office")
    # And one over its knowledge tiers (phase 1 of the cascade). On a table this small
    # the planner prefers the (org_id, tier, status) index; at 1M it picks this one
    # (docs/benchmarks.md, session 7), so here its definition is what is checked.
    with connection.cursor() as c:
        c.execute(
            "SELECT pg_get_indexdef(%s::regclass)",
            [vector_indexes.knowledge_gin_index_name(world.acme.pk)],
        )
        definition = c.fetchone()[0]
    assert "USING gin (search)" in definition
    assert f"org_id = {world.acme.pk}" in definition
    assert all(t in definition for t in PHASE_TIERS[1])
    assert not any(t in definition for t in PHASE_TIERS[2])
    knowledge = _plan(acme, query, tiers=PHASE_TIERS[1])
    assert vector_indexes.knowledge_index_name(world.acme.pk) in knowledge
    assert vector_indexes.index_name(world.acme.pk) not in _plan(globex, query)
    assert vector_indexes.GIN_PREFIX not in _lexical_plan(globex, "office")
    # Idempotent: a second run keeps what is there.
    again = vector_indexes.sync_tenant_indexes(min_rows=5)
    assert not again.create and not again.drop
    assert [org for org, _ in again.keep] == [world.acme.pk]


def test_index_dropped_when_tenant_shrinks_below_half(world, cleanup_indexes):
    _stock(world.principal("agent_a"), TEXTS)
    vector_indexes.sync_tenant_indexes(min_rows=5)
    # 6 rows: still above half of 10, kept (no flapping near the line) ...
    kept = vector_indexes.sync_tenant_indexes(min_rows=10)
    assert not kept.drop and vector_indexes.existing() == {world.acme.pk}
    # ... under half of 20: dropped, both kinds.
    dropped = vector_indexes.sync_tenant_indexes(min_rows=20)
    assert [org for org, _ in dropped.drop] == [world.acme.pk]
    assert vector_indexes.existing() == set()
    assert vector_indexes.GIN_PREFIX not in _lexical_plan(
        world.principal("agent_a"), "office"
    )


def test_a_tenant_indexed_before_the_gin_indexes_gets_its_gin_index(
    world, cleanup_indexes
):
    from config.db import roles

    _stock(world.principal("agent_a"), TEXTS)
    vector_indexes.sync_tenant_indexes(min_rows=5)
    with roles.owner_mode(connection), connection.cursor() as c:
        c.execute(f"DROP INDEX {vector_indexes.gin_index_name(world.acme.pk)}")
    assert vector_indexes.existing() == set()
    todo = vector_indexes.sync_tenant_indexes(min_rows=5)
    assert [org for org, _ in todo.create] == [world.acme.pk]
    assert vector_indexes.existing() == {world.acme.pk}


def test_an_index_left_invalid_by_a_failed_build_is_rebuilt(world, cleanup_indexes):
    from config.db import roles

    acme = world.principal("agent_a")
    _stock(acme, TEXTS)
    vector_indexes.sync_tenant_indexes(min_rows=5)
    name = vector_indexes.index_name(world.acme.pk)
    # What a cancelled CREATE INDEX CONCURRENTLY leaves behind: the index exists
    # (IF NOT EXISTS would skip it) but is not valid, so the planner never uses it.
    with roles.owner_mode(connection), connection.cursor() as c:
        c.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [name],
        )
    assert vector_indexes.invalid() == {world.acme.pk}
    assert vector_indexes.existing() == set()

    todo = vector_indexes.sync_tenant_indexes(min_rows=5)

    assert todo.rebuilt == [world.acme.pk]
    assert [org for org, _ in todo.create] == [world.acme.pk]
    assert vector_indexes.existing() == {world.acme.pk}
    assert vector_indexes.invalid() == set()
    assert name in _plan(acme, "when does the new office open?")


def test_command_dry_run_changes_nothing_and_rejects_bad_input(
    world, cleanup_indexes, capsys
):
    _stock(world.principal("agent_a"), TEXTS)
    call_command("vector_indexes", "--min-rows", "5", "--dry-run")
    out = capsys.readouterr().out
    assert f"would create {vector_indexes.index_name(world.acme.pk)} (6 rows)" in out
    assert vector_indexes.existing() == set()
    call_command("vector_indexes", "--min-rows", "5")
    assert "in " in capsys.readouterr().out  # build time is reported
    assert vector_indexes.existing() == {world.acme.pk}
    with pytest.raises(CommandError, match="at least 1"):
        call_command("vector_indexes", "--min-rows", "0")


def test_a_tenant_with_a_large_own_index_searches_wider(
    world, cleanup_indexes, monkeypatch
):
    _stock(world.principal("agent_a"), TEXTS)
    vector_indexes.sync_tenant_indexes(min_rows=5)
    # At 1M rows a 220k-row tenant index needed ef_search 600-800 for recall@10 >= 0.95;
    # here "large" is lowered to this test's six rows.
    monkeypatch.setattr(channels, "LARGE_TENANT_ROWS", 6)

    def ef_after_probe(org_id):
        with transaction.atomic(), connection.cursor() as c:
            channels.store_probe([], config_org=org_id, ef_search=100)
            c.execute("SHOW hnsw.ef_search")
            return int(c.fetchone()[0])

    assert ef_after_probe(world.acme.pk) == channels.LARGE_TENANT_EF_SEARCH
    assert ef_after_probe(world.globex.pk) == channels.MIN_EF_SEARCH  # no own index
    monkeypatch.setattr(channels, "LARGE_TENANT_ROWS", 7)
    assert ef_after_probe(world.acme.pk) == channels.MIN_EF_SEARCH


def test_knowledge_tier_indexes_only_for_the_largest_tenants(
    world, cleanup_indexes, settings
):
    _stock(world.principal("agent_a"), TEXTS)
    settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS = 100
    vector_indexes.sync_tenant_indexes(min_rows=5)
    assert vector_indexes.existing() == {world.acme.pk}
    assert vector_indexes.with_knowledge_indexes() == set()
    # The tenant is now over the (lowered) line: the next sync adds them ...
    settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS = 6
    grown = vector_indexes.sync_tenant_indexes(min_rows=5)
    assert [org for org, _ in grown.create] == [world.acme.pk]
    assert vector_indexes.with_knowledge_indexes() == {world.acme.pk}
    # ... and once it is under half of it, they go; its own HNSW and GIN stay.
    settings.MNEMO_TENANT_KNOWLEDGE_INDEX_MIN_ROWS = 20
    shrunk = vector_indexes.sync_tenant_indexes(min_rows=5)
    assert [org for org, _ in shrunk.trim] == [world.acme.pk] and not shrunk.drop
    assert vector_indexes.with_knowledge_indexes() == set()
    assert vector_indexes.existing() == {world.acme.pk}


def _shared_definition():
    with connection.cursor() as c:
        c.execute("SELECT pg_get_indexdef(%s::regclass)", [vector_indexes.SHARED])
        return c.fetchone()[0]


def test_a_partial_shared_index_leaves_out_tenants_with_their_own(
    world, cleanup_indexes, settings
):
    settings.MNEMO_SHARED_HNSW = "partial"
    acme, globex = world.principal("agent_a"), world.principal("agent_globex")
    _stock(acme, TEXTS)
    _stock(globex, TEXTS[:2])
    query = "when does the new office open?"
    before = {p: _vector_ids(p, query) for p in (acme, globex)}
    shared = vector_indexes.SHARED
    assert vector_indexes.shared_excluded() == set()  # as the migration built it
    assert shared in _plan(globex, query) and shared in _plan(acme, query)

    todo = vector_indexes.sync_tenant_indexes(min_rows=5)

    # Rebuilt over the other orgs' rows only: a row of Acme goes into one graph.
    assert todo.shared_rebuild and todo.shared_built_s is not None
    assert vector_indexes.shared_excluded() == {world.acme.pk}
    assert f"WHERE (org_id <> ALL ('{{{world.acme.pk}}}'" in _shared_definition()
    assert "m='16'" in _shared_definition().replace(" ", "")
    # The planner proves Globex's rows are in it, and Acme's are not.
    assert shared in _plan(globex, query)
    acme_plan = _plan(acme, query)
    assert shared not in acme_plan
    assert vector_indexes.index_name(world.acme.pk) in acme_plan
    assert {p: _vector_ids(p, query) for p in (acme, globex)} == before
    with connection.cursor() as c:
        c.execute(
            "SELECT count(*) FROM pg_class WHERE relname = %s", [f"{shared}_next"]
        )
        assert c.fetchone()[0] == 0  # the new index took the name
    # Idempotent.
    again = vector_indexes.sync_tenant_indexes(min_rows=5)
    assert not again.shared_rebuild and again.shared_built_s is None

    # Acme shrinks under half of the line: back in the shared index before its own
    # index goes, so its queries never lose an index.
    dropped = vector_indexes.sync_tenant_indexes(min_rows=20)
    assert [org for org, _ in dropped.drop] == [world.acme.pk]
    assert vector_indexes.shared_excluded() == set()
    assert "WHERE" not in _shared_definition()
    assert shared in _plan(acme, query)
    assert {p: _vector_ids(p, query) for p in (acme, globex)} == before


def test_a_missing_or_half_built_shared_index_is_rebuilt(
    world, cleanup_indexes, settings
):
    from config.db import roles

    settings.MNEMO_SHARED_HNSW = "full"
    acme = world.principal("agent_a")
    _stock(acme, TEXTS)
    # What a failed rebuild leaves behind (an index under the next name) and what the
    # benchmark's bulk load leaves (no shared index at all).
    with roles.owner_mode(connection), connection.cursor() as c:
        c.execute(f"CREATE INDEX {vector_indexes.SHARED_NEXT} ON memory_memory (id)")
        c.execute(f"DROP INDEX {vector_indexes.SHARED}")
    assert vector_indexes.shared_excluded() is None
    plan = vector_indexes.sync_tenant_indexes(min_rows=10**9, dry_run=True)
    assert plan.shared_rebuild and vector_indexes.shared_excluded() is None

    todo = vector_indexes.sync_tenant_indexes(min_rows=10**9)

    assert todo.shared_rebuild and vector_indexes.shared_excluded() == set()
    assert "USING hnsw (embedding vector_cosine_ops)" in _shared_definition()
    assert vector_indexes.SHARED in _plan(acme, "when does the new office open?")


def test_the_shared_index_stays_whole_past_the_planners_list_limit(
    world, cleanup_indexes
):
    """PostgreSQL proves ``org_id = N`` implies ``org_id <> ALL (list)`` only for up
    to 100 constants; past that a small org's query could not use the shared index."""
    from config.db import roles

    limit = vector_indexes.SHARED_EXCLUDE_MAX
    rows = dict.fromkeys(range(1, limit + 2), 10)
    assert vector_indexes.shared_exclusion(set(range(1, limit + 1)), rows=rows) == set(
        range(1, limit + 1)
    )
    assert vector_indexes.shared_exclusion(set(rows), rows=rows) == set()
    assert vector_indexes.shared_exclusion({1, 999}, rows=rows) == {1}  # no rows

    globex = world.principal("agent_globex")
    _stock(globex, TEXTS[:2])
    others = [world.globex.pk + 1000 + i for i in range(limit + 1)]
    with roles.owner_mode(connection), connection.cursor() as c:
        for n, expect in ((limit, True), (limit + 1, False)):
            vector_indexes._rebuild_shared(c, set(others[:n]), {})
            used = vector_indexes.SHARED in _plan(globex, "office opening")
            assert used is expect, n


def test_by_default_the_shared_index_goes_and_small_orgs_are_scanned_exactly(
    world, cleanup_indexes, settings, capsys
):
    acme, globex = world.principal("agent_a"), world.principal("agent_globex")
    _stock(acme, TEXTS)
    _stock(globex, TEXTS[:2])
    query = "when does the new office open?"
    before = {p: _vector_ids(p, query) for p in (acme, globex)}
    assert settings.MNEMO_SHARED_HNSW == "none"  # the default
    plan = vector_indexes.sync_tenant_indexes(min_rows=5, dry_run=True)
    assert plan.shared_rebuild and plan.shared_after is None
    assert vector_indexes.shared_excluded() == set()  # a dry run changes nothing

    todo = vector_indexes.sync_tenant_indexes(min_rows=5)

    assert todo.shared_rebuild and vector_indexes.shared_excluded() is None
    assert vector_indexes.existing() == {world.acme.pk}
    # Acme searches its own graph; Globex, under the line, is scanned exactly.
    assert vector_indexes.index_name(world.acme.pk) in _plan(acme, query)
    globex_plan = _plan(globex, query)
    assert "hnsw" not in globex_plan and "Sort" in globex_plan
    assert {p: _vector_ids(p, query) for p in (acme, globex)} == before
    call_command("vector_indexes", "--min-rows", "5")
    assert (
        "no memory_embedding_hnsw (MNEMO_SHARED_HNSW=none)" in capsys.readouterr().out
    )
    # Acme falls under half of the line: its own index goes, it is scanned exactly.
    vector_indexes.sync_tenant_indexes(min_rows=20)
    assert vector_indexes.existing() == set()
    assert "hnsw" not in _plan(acme, query)
    assert {p: _vector_ids(p, query) for p in (acme, globex)} == before

    # The beat task runs the same sync; nothing is left to do.
    from memory import tasks

    settings.MNEMO_TENANT_HNSW_MIN_ROWS = 20
    assert tasks.sync_vector_indexes() == {
        "created": 0,
        "dropped": 0,
        "shared_changed": 0,
    }

    settings.MNEMO_SHARED_HNSW = "some"
    with pytest.raises(CommandError, match="MNEMO_SHARED_HNSW must be one of"):
        call_command("vector_indexes", "--min-rows", "5")
    assert vector_indexes.existing() == set()


def test_an_org_that_outgrows_the_line_is_due_at_once(world, cleanup_indexes):
    """The embedding task asks for a sync as soon as an org it stored rows for holds
    enough rows for its own indexes (not six hours later at the next beat)."""
    acme, globex = world.principal("agent_a"), world.principal("agent_globex")
    _stock(acme, TEXTS)
    _stock(globex, TEXTS[:2])
    orgs = [world.acme.pk, world.globex.pk]
    vector_indexes._due_checked.clear()
    assert vector_indexes.orgs_due(orgs, min_rows=5) == [world.acme.pk]
    # Counted at most once a minute per org and process.
    assert vector_indexes.orgs_due(orgs, min_rows=5) == []
    vector_indexes._due_checked.clear()
    vector_indexes.sync_tenant_indexes(min_rows=5)
    assert vector_indexes.orgs_due(orgs, min_rows=5) == []  # it has its own now
    vector_indexes._due_checked.clear()
    assert vector_indexes.orgs_due(orgs, min_rows=2) == [world.globex.pk]


def test_with_eager_tasks_the_due_org_waits_for_the_beat(
    world, cleanup_indexes, settings
):
    """Eager tasks run inside the web request's transaction, where CREATE INDEX
    CONCURRENTLY cannot run: nothing is counted or enqueued, nothing fails."""
    from memory import tasks

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.MNEMO_TENANT_HNSW_MIN_ROWS = 5
    acme = world.principal("agent_a")
    result = services.memory_remember(
        principal=acme,
        items=[services.MemoryInput(content=t) for t in TEXTS],
        enqueue=False,
    )
    ids = [m.pk for m in result.memories]
    services.memory_embed(ids=ids)
    vector_indexes._due_checked.clear()
    assert vector_indexes.orgs_due([world.acme.pk]) == [world.acme.pk]
    vector_indexes._due_checked.clear()
    assert tasks.request_index_sync(ids) == []
    assert vector_indexes.existing() == set()
