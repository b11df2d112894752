"""Channel SQL against the real database: rare-term probing and reply neighbours."""

from __future__ import annotations

import pytest

from memory import services
from memory.services import MemoryInput
from recall import channels
from recall.scope import Scope
from tests.conftest import prepared_plans

pytestmark = pytest.mark.django_db


def remember(principal, *items, session=None):
    return services.memory_remember(
        principal=principal, items=list(items), session=session, enqueue=False
    ).memories


def test_a_scope_over_the_cap_finds_candidates_by_its_rare_terms(world):
    alice = world.principal("alice")
    rows = remember(
        alice,
        *[MemoryInput(content=f"project status update number {i}") for i in range(39)],
        MemoryInput(content="the zeppelin project is grounded"),
    )
    zeppelin = rows[-1]
    scope = Scope(principal=alice, tiers=("raw",))
    channels._df_cache.clear()
    channels._population_cache.clear()
    # Small enough to hold every match: all 40 rows are candidates.
    wide = channels.lexical_channel(
        scope, ["zeppelin", "project"], k=50, candidate_cap=100
    )
    assert len(wide) == 40 and wide[0].memory_id == zeppelin.pk
    # Over the cap, "project" (in every row) no longer finds candidates; it still
    # scores. "zeppelin" is counted exactly; "project" only up to the common
    # threshold (5% of 40 rows = 2), so its floor is 3.
    probe, exact, floors = channels.probe_terms(scope, ["zeppelin", "project"], 40)
    assert probe == ["zeppelin"] and exact == [1.0, None] and floors == [None, 3.0]
    narrow = channels.lexical_channel(
        scope, ["zeppelin", "project"], k=50, candidate_cap=10
    )
    assert [h.memory_id for h in narrow] == [zeppelin.pk]
    assert narrow[0].detail["matched_terms"] == 2
    # Every term common (both counted to the cap): one of them probes.
    assert channels.probe_terms(scope, ["project", "status"], 40)[0] == ["project"]


def test_neighbours_are_the_other_party_s_adjacent_turns_the_scope_may_see(world):
    alice, carol = world.principal("alice"), world.principal("carol")
    session = services.session_create(
        principal=alice, external_id="chat", visibility="org"
    )
    q, a, follow, later = remember(
        alice,
        MemoryInput(content="Where did you go?", speaker="Mel"),
        MemoryInput(content="To the lake", speaker="Caroline"),
        MemoryInput(content="And it was cold", speaker="Caroline"),
        MemoryInput(content="Brr", speaker="Mel"),
        session=session,
    )
    got = channels.neighbor_ids(
        Scope(principal=alice, tiers=("raw",)), [a.pk, follow.pk]
    )
    assert sorted(got[a.pk]) == [q.pk]  # not the same speaker's next turn
    assert sorted(got[follow.pk]) == [later.pk]
    # Another org's principal gets nothing of Acme's session.
    assert channels.neighbor_ids(Scope(principal=carol, tiers=("raw",)), [a.pk]) == {}


def test_a_small_scope_tests_its_rows_and_ranks_as_the_index_does(world, settings):
    """Under MNEMO_LEXICAL_SCAN_MAX_ROWS the candidates come from testing each row's
    tsvector (no GIN index clause); the ranking is the same as through the index, and
    what the scope may not see stays out either way."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    alice, bob = world.principal("alice"), world.principal("bob")
    carol = world.principal("carol")  # another org
    rows = remember(
        alice,
        *[MemoryInput(content=f"budget review meeting number {i}") for i in range(12)],
        MemoryInput(content="the zeppelin budget is over", visibility="org"),
        MemoryInput(content="zeppelin notes, private", visibility="private"),
    )

    def run(principal, limit):
        settings.MNEMO_LEXICAL_SCAN_MAX_ROWS = limit
        channels._population_cache.clear()
        with CaptureQueriesContext(connection) as cq:
            hits = channels.lexical_channel(
                Scope(principal=principal, tiers=("raw",)),
                ["zeppelin", "budget"],
                k=50,
            )
        (sql,) = [q["sql"] for q in cq.captured_queries if "WITH live" in q["sql"]]
        return [(h.memory_id, round(h.score, 9)) for h in hits], sql

    scanned, sql = run(alice, 1500)
    assert "ts_match_vq(m.search" in sql and "m.search @@ to_tsquery" not in sql
    indexed, sql = run(alice, 0)
    assert "m.search @@ to_tsquery" in sql and "ts_match_vq" not in sql
    assert scanned == indexed and len(scanned) == 14
    assert scanned[0][0] in {rows[-1].pk, rows[-2].pk}
    for limit in (1500, 0):
        seen = {m for m, _ in run(bob, limit)[0]}
        assert rows[-2].pk in seen and rows[-1].pk not in seen  # org row; private
        assert run(carol, limit)[0] == []


def test_a_scope_that_is_a_small_share_of_its_org_is_scanned_too(world, settings):
    """Past MNEMO_LEXICAL_SCAN_MAX_ROWS a scope is still scanned while it holds at most
    LEXICAL_SCAN_SHARE of its org's rows (any org GIN index holds the whole org)."""
    alice = world.principal("alice")
    session = services.session_create(principal=alice, external_id="narrow")
    remember(alice, *[MemoryInput(content=f"zeppelin budget {i}") for i in range(14)])
    remember(
        alice,
        MemoryInput(content="zeppelin in the narrow session"),
        MemoryInput(content="budget in the narrow session"),
        session=session,
    )
    settings.MNEMO_LEXICAL_SCAN_MAX_ROWS = 1
    channels._population_cache.clear()
    narrow = Scope(principal=alice, tiers=("raw",), sessions=(session.pk,))
    wide = Scope(principal=alice, tiers=("raw",))
    assert channels._org_rows(world.acme.pk) == 16
    # 2 rows, 2 <= 0.2 * 16: scanned; 16 rows of 16: the index.
    assert channels.scan_lexically(narrow, 2, candidate_cap=2000)
    assert not channels.scan_lexically(wide, 16, candidate_cap=2000)
    # Never when the cap could cut candidates, nor when the setting is 0.
    assert not channels.scan_lexically(narrow, 2, candidate_cap=1)
    settings.MNEMO_LEXICAL_SCAN_MAX_ROWS = 0
    assert not channels.scan_lexically(narrow, 2, candidate_cap=2000)
    settings.MNEMO_LEXICAL_SCAN_MAX_ROWS = 1
    hits = channels.lexical_channel(narrow, ["zeppelin", "budget"], k=10)
    assert len(hits) == 2


def test_id_lookups_run_once_planned_as_generic_prepared_statements(world, settings):
    """Hydration, neighbours and speakers are planned once per connection (generic
    plans), answer as before, and still see only what the principal may see."""

    alice, carol = world.principal("alice"), world.principal("carol")
    rows = remember(
        alice,
        MemoryInput(content="the zeppelin budget", speaker="Mel"),
        MemoryInput(content="is over", speaker="Caroline"),
    )
    ids = [r.pk for r in rows]
    for _ in range(3):
        assert set(channels.read_rows(alice, ids)) == set(ids)
        assert channels.speakers_of(ids) == {ids[0]: "mel", ids[1]: "caroline"}
    assert channels.read_rows(carol, ids) == {}  # another org: nothing
    assert prepared_plans("SELECT id, lower(speaker) FROM memory_memory") == (3, 0)
    settings.MNEMO_RECALL_GENERIC_PLANS = False  # through Django's cursor instead
    assert set(channels.read_rows(alice, ids)) == set(ids)
    assert channels.read_rows(carol, ids) == {}


def test_the_store_probe_is_planned_once_per_connection(world, settings):
    """The store probe (presence, pending rows, the org's settings) runs as a generic
    prepared statement and answers per principal: another org sees no rows."""
    alice, carol = world.principal("alice"), world.principal("carol")
    remember(alice, MemoryInput(content="the zeppelin budget"))
    mine = Scope(principal=alice, tiers=("raw",))
    theirs = Scope(principal=carol, tiers=("raw",))
    for _ in range(3):
        channels.clear_caches()  # presence is remembered: ask the database each time
        probe = channels.store_probe(
            [mine], pending=mine, config_org=world.acme.pk, ef_search=100
        )
        assert probe.present == [True]
    other = channels.store_probe(
        [theirs], pending=theirs, config_org=world.globex.pk, ef_search=100
    )
    assert other.present == [False] and other.pending == 0
    assert prepared_plans("SELECT set_config('hnsw.ef_search'") == (4, 0)
    settings.MNEMO_RECALL_GENERIC_PLANS = False
    channels.clear_caches()
    assert channels.store_probe([mine, theirs]).present == [True, False]
