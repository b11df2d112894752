"""Recall part two: lanes, controls, honest no-match, communities, suggested actions."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import rls
from accounts.models import Agent, ApiKey, Organization
from accounts.principals import Principal
from accounts.rls import activate_principal
from memory import services
from memory.models import Conflict, ConflictAlternative, Entity, Relationship
from memory.services import MemoryInput
from recall.communities import communities_for_pack, communities_recompute
from recall.pipeline.communities import groups, label_propagation
from recall.scope import Scope, eligibility_sql
from recall.services import recall_run
from recall.types import PHASE_KINDS, PHASE_TIERS, RecallRequest
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

NONSENSE = "zebra quantum xylophone galaxy?"


def remember(principal, *items, session=None):
    result = services.memory_remember(
        principal=principal, items=list(items), session=session, enqueue=False
    )
    services.memory_embed(ids=[m.pk for m in result.memories])
    return result.memories


def recall(client, **body):
    return client.post("/api/v1/recall", {"budget_tokens": 2000, **body}, format="json")


@pytest.fixture
def trip(world):
    """An org-wide conversation about a pottery trip, plus a second session."""
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="trip", visibility="org"
    )
    other = services.session_create(
        principal=alice, external_id="other", visibility="org"
    )
    when = timezone.now() - timedelta(days=3)
    rows = remember(
        alice,
        MemoryInput(
            content="Caroline went to the pottery workshop in Boston",
            speaker="Caroline",
            occurred_at=when,
        ),
        MemoryInput(
            content="It was lovely, she made a blue bowl",
            speaker="Mel",
            occurred_at=when + timedelta(minutes=1),
        ),
        session=session,
    )
    return {"session": session, "other": other, "rows": rows}


def lanes_of(body):
    return [i["lane"] for i in body["items"]]


# --- rule overlay ---------------------------------------------------------------------


def test_rules_ride_along_ahead_of_items_within_their_cap(world, trip):
    alice, bob = world.principal("alice"), world.principal("bob")
    for n in range(5):
        remember(
            alice,
            MemoryInput(
                content=f"Rule {n}: always answer in British English",
                tier="procedural",
                kind="rule",
                visibility="org",
            ),
        )
    secret = remember(
        bob,
        MemoryInput(
            content="Rule: team B deploys on Tuesdays only",
            tier="procedural",
            kind="rule",
            visibility="team",
        ),
    )[0]
    body = recall(
        client_for(world, "alice"), query="Where did Caroline do pottery?"
    ).json()
    lanes = lanes_of(body)
    assert lanes.count("rule") == 3  # the default cap
    assert lanes[:3] == ["rule"] * 3 and "fused" in lanes
    assert secret.pk not in [i["id"] for i in body["items"]]  # overlays keep visibility
    assert sum(1 for o in body["omitted"] if o["reason"] == "rule_cap") == 2
    assert body["items"][0]["explain"]["lane"] == "rule"


def test_rules_never_take_more_than_their_budget_share(world, trip):
    alice = world.principal("alice")
    for n in range(3):
        remember(
            alice,
            MemoryInput(
                content=f"Rule {n}: " + "keep every reply short " * 4,
                tier="procedural",
                kind="rule",
            ),
        )
    body = recall(
        client_for(world, "alice"), query="Caroline pottery Boston", budget_tokens=120
    ).json()
    rule_tokens = sum(i["tokens"] for i in body["items"] if i["lane"] == "rule")
    assert rule_tokens <= 24 and lanes_of(body).count("rule") <= 1
    assert body["total_tokens"] <= 120
    off = recall(
        client_for(world, "alice"), query="Caroline pottery Boston", include_rules=False
    ).json()
    assert "rule" not in lanes_of(off)


# --- lesson overlay and the current session -------------------------------------------


def test_lessons_from_other_sessions_join_unless_the_current_session_is_preferred(
    world, trip
):
    alice = world.principal("alice")
    lesson = remember(
        alice,
        MemoryInput(
            content="Lesson: Caroline's pottery workshop in Boston books out early",
            tier="procedural",
            kind="lesson",
        ),
        session=trip["other"],
    )[0]
    client = client_for(world, "alice")
    body = recall(
        client, query="Caroline pottery workshop Boston", session=trip["session"].pk
    ).json()
    assert lesson.pk in [i["id"] for i in body["items"] if i["lane"] == "lesson"]
    narrow = recall(
        client,
        query="Caroline pottery workshop Boston",
        session=trip["session"].pk,
        prefer_current_session=True,
    ).json()
    assert lesson.pk not in [i["id"] for i in narrow["items"]]
    assert {i["session"] for i in narrow["items"]} <= {trip["session"].pk}
    refused = recall(client, query="pottery", prefer_current_session=True)
    assert refused.status_code == 400


# --- exact reference ------------------------------------------------------------------


def test_reference_ids_come_back_byte_for_byte_and_the_rest_are_not_found(world, trip):
    odd = "  Exact   bytes: tabs\tand trailing space "
    row = remember(world.principal("alice"), MemoryInput(content=odd))[0]
    private = remember(
        world.principal("bob"),
        MemoryInput(content="bob's own note", visibility="private"),
    )[0]
    foreign = remember(world.principal("carol"), MemoryInput(content="globex row"))[0]
    body = recall(
        client_for(world, "alice"),
        query=NONSENSE,
        reference_ids=[row.pk, private.pk, foreign.pk, 10**9],
    ).json()
    refs = [i for i in body["items"] if i["lane"] == "reference"]
    assert [(i["id"], i["content"]) for i in refs] == [(row.pk, odd)]
    assert body["not_found"] == [private.pk, foreign.pk, 10**9]


# --- working memory -------------------------------------------------------------------


def test_working_memory_is_recalled_first_for_its_session_and_can_be_opted_out(
    world, trip
):
    client = client_for(world, "alice")
    url = f"/api/v1/sessions/{trip['session'].pk}/state"
    put = client.put(
        url, {"state": {"goal": "plan the Boston trip", "step": 2}}, format="json"
    )
    assert put.status_code == 200, put.content
    assert client.get(url).json()["state"] == {
        "goal": "plan the Boston trip",
        "step": 2,
    }
    body = recall(client, query="Caroline pottery", session=trip["session"].pk).json()
    wm = body["working_memory"]
    assert wm["state"]["goal"] == "plan the Boston trip" and wm["untrusted"] is True
    assert body["total_tokens"] == wm["tokens"] + sum(
        i["tokens"] for i in body["items"]
    )
    off = recall(
        client,
        query="Caroline pottery",
        session=trip["session"].pk,
        include_working_memory=False,
    ).json()
    assert off["working_memory"] is None
    other_session = recall(
        client, query="Caroline pottery", session=trip["other"].pk
    ).json()
    assert other_session["working_memory"] is None


def test_working_memory_follows_session_visibility(world, trip):
    private = services.session_create(
        principal=world.principal("alice"), external_id="mine", visibility="private"
    )
    for name in ("carol", "bob"):
        client = client_for(world, name)
        assert client.get(f"/api/v1/sessions/{private.pk}/state").status_code == 404
        assert (
            client.put(
                f"/api/v1/sessions/{private.pk}/state",
                {"state": {"x": 1}},
                format="json",
            ).status_code
            == 404
        )
    assert (
        client_for(world, "vera")
        .put(
            f"/api/v1/sessions/{trip['session'].pk}/state",
            {"state": {"x": 1}},
            format="json",
        )
        .status_code
        == 403
    )
    assert client_for(world, "anonymous").get(
        f"/api/v1/sessions/{trip['session'].pk}/state"
    ).status_code in (401, 403)


# --- honest no-match and the recency fallback -----------------------------------------


def test_nothing_relevant_gives_an_empty_pack_with_no_match(world, trip):
    body = recall(client_for(world, "alice"), query=NONSENSE).json()
    assert (
        body["no_match"] is True and body["items"] == [] and body["fallback"] is False
    )
    assert any(o["reason"] == "below_relevance" for o in body["omitted"]) or True
    ok = recall(
        client_for(world, "alice"), query="Where did Caroline do pottery?"
    ).json()
    assert ok["no_match"] is False and ok["items"]
    for item in ok["items"]:
        assert item["explain"]["relevance"]


def test_a_lexical_only_hit_needs_two_distinct_terms(world, trip):
    client = client_for(world, "alice")
    lexical = {"vector": 0.0, "temporal": 0.0}
    one = recall(client, query="bowl zeppelin", weights=lexical).json()
    assert one["no_match"] is True
    two = recall(client, query="blue bowl", weights=lexical).json()
    assert two["no_match"] is False
    assert "matched 2 terms" in two["items"][0]["explain"]["relevance"]


def test_the_session_recency_fallback_is_flagged(world, trip):
    body = recall(
        client_for(world, "alice"), query=NONSENSE, session=trip["session"].pk
    ).json()
    assert body["no_match"] is True and body["fallback"] is True
    assert lanes_of(body) == ["fallback", "fallback"]
    assert body["items"][0]["id"] == trip["rows"][1].pk  # newest first
    off = recall(
        client_for(world, "alice"),
        query=NONSENSE,
        session=trip["session"].pk,
        recency_fallback=False,
    ).json()
    assert off["items"] == []


# --- controls -------------------------------------------------------------------------


def test_budget_levels_change_depth_graph_and_phases(world, trip):
    alice = world.principal("alice")
    low = recall_run(
        alice,
        RecallRequest(query="Caroline pottery", budget_level="low", record_event=False),
    )
    high = recall_run(
        alice,
        RecallRequest(
            query="Caroline pottery", budget_level="high", record_event=False
        ),
    )
    assert low.phase_reached <= 2 and "phase3" not in low.coverage
    # No chunks or artifacts in the org: phase 3 is skipped by the presence probe
    # (no channel queries, no variant embeddings) and says so.
    assert high.phase_reached == 2
    assert high.coverage["phase3"] == {"skipped": "no eligible rows"}
    assert (
        "p3.vector" not in high.timings_ms and "embed_variants" not in high.timings_ms
    )
    assert high.items[0].explain["weights"]["graph"] > 0
    assert low.controls["budget_level"] == "low"
    assert (
        recall(client_for(world, "alice"), query="x", budget_level="max").status_code
        == 400
    )


def test_presence_probe_remembers_present_scopes_only(world, trip):
    from recall import channels

    alice, carol = world.principal("alice"), world.principal("carol")
    chunks = Scope(principal=alice, tiers=("raw",), kinds=("chunk",))
    messages = Scope(principal=alice, tiers=("raw",))
    elsewhere = Scope(principal=carol, tiers=("raw",))

    def probe(*scopes):
        with CaptureQueriesContext(connection) as q:
            present = channels.store_probe(list(scopes)).present
        probes = "EXISTS (SELECT 1 FROM memory_memory"
        return present, sum(s["sql"].count(probes) for s in q)

    assert probe(chunks, messages, elsewhere) == ([False, True, False], 3)
    # The scope found present is not asked again; the empty ones are, every time,
    # and another org's scope never shares an entry with this one.
    assert probe(chunks, messages, elsewhere) == ([False, True, False], 2)
    remember(alice, MemoryInput(content="Kiln manual: glaze at 1200", kind="chunk"))
    assert probe(chunks, messages, elsewhere) == ([True, True, False], 2)
    assert probe(chunks, messages, elsewhere) == ([True, True, False], 1)
    assert probe(messages, chunks) == ([True, True], 0)


def test_phase_three_runs_when_chunks_exist_and_embeds_variants(world, trip):
    alice = world.principal("alice")
    remember(
        alice,
        MemoryInput(
            content="Kiln manual: pottery glaze fires at 1200 degrees",
            kind="chunk",
        ),
        session=trip["session"],
    )
    high = recall_run(
        alice,
        RecallRequest(
            query="Caroline pottery", budget_level="high", record_event=False
        ),
    )
    assert high.phase_reached == 3
    assert "skipped" not in high.coverage.get("phase3", {})
    assert "p3.vector" in high.timings_ms and "embed_variants" in high.timings_ms
    assert any(i.kind == "chunk" for i in high.items)


def test_env_tags_boost_matches_and_penalise_conflicts_in_explain(world, trip):
    alice = world.principal("alice")
    prod, dev = remember(
        alice,
        MemoryInput(
            content="Deploy the pottery shop app with the blue pipeline",
            env_tags=("prod",),
        ),
        MemoryInput(
            content="On laptops we deploy pottery builds through a blue "
            "pipeline script by hand",
            env_tags=("dev",),
        ),
    )
    body = recall(
        client_for(world, "alice"),
        query="deploy pottery blue pipeline",
        env_tags=["prod"],
    ).json()
    by_id = {i["id"]: i for i in body["items"]}
    assert by_id[prod.pk]["explain"]["boosts"]["env_tag_match"] > 1
    assert by_id[dev.pk]["explain"]["penalties"]["env_tag_conflict"] < 1
    assert body["controls"]["env_tags"] == ["prod"]


def test_agent_read_scopes_cannot_be_widened_by_the_request(world, trip):
    fact = remember(
        world.principal("alice"),
        MemoryInput(
            content="Caroline likes pottery in Boston", tier="semantic", kind="fact"
        ),
    )[0]
    agent = Agent.objects.create(
        org=world.acme, name="facts-only", read_scopes={"tiers": ["semantic"]}
    )
    _, key = ApiKey.issue(agent=agent)
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    body = recall(
        client,
        query="Caroline pottery Boston",
        tiers=["raw", "semantic"],
        reference_ids=[trip["rows"][0].pk],
        session=trip["session"].pk,
    ).json()
    assert {i["tier"] for i in body["items"]} <= {"semantic"}
    assert fact.pk in [i["id"] for i in body["items"]]
    assert body["not_found"] == [trip["rows"][0].pk]


def _topic(principal, rows, text):
    return remember(
        principal,
        MemoryInput(
            content=text,
            tier="topic",
            kind="topic",
            derived_from=tuple(r.pk for r in rows),
        ),
    )[0]


def test_altitude_never_packs_a_digest_with_the_rows_it_covers(world, trip):
    alice = world.principal("alice")
    rows = remember(
        alice,
        *[
            MemoryInput(
                content=f"Caroline pottery Boston note {n}: "
                + "clay glaze kiln wheel " * 12
            )
            for n in range(6)
        ],
    )
    topic = _topic(
        alice, rows, "About Caroline: pottery in Boston (clay, glaze, kiln)."
    )
    client = client_for(world, "alice")
    for altitude in ("auto", "rows", "digests", "root"):
        body = recall(
            client,
            query="Caroline pottery Boston clay glaze",
            budget_tokens=300,
            altitude=altitude,
        ).json()
        ids = {i["id"] for i in body["items"]}
        assert not (topic.pk in ids and ids & {r.pk for r in rows}), altitude
    climbed = recall(
        client, query="Caroline pottery Boston clay glaze", budget_tokens=300
    ).json()
    assert climbed["controls"]["altitude"]["used"] == "digests"
    assert climbed["items"][0]["id"] == topic.pk
    root = recall(
        client, query="Caroline pottery Boston clay glaze", altitude="root"
    ).json()
    assert [i["tier"] for i in root["items"]] == ["topic"]
    rows_only = recall(
        client, query="Caroline pottery Boston clay glaze", altitude="rows"
    ).json()
    assert "topic" not in {i["tier"] for i in rows_only["items"]}


# --- communities and suggested actions ------------------------------------------------


def test_label_propagation_groups_connected_entities():
    labels = label_propagation([(1, 2), (2, 3), (3, 1), (7, 8), (8, 9)])
    assert sorted(groups(labels).values()) == [[1, 2, 3], [7, 8, 9]]


def _entities(world, names):
    return {
        n: Entity.objects.get_or_create(
            org=world.acme,
            normalized_name=n.lower(),
            merged_into=None,
            defaults={"name": n},
        )[0]
        for n in names
    }


def _fact(principal, subject, predicate, obj, **kw):
    row = remember(
        principal,
        MemoryInput(
            content=f"{subject.name} {predicate} {obj.name}",
            tier="semantic",
            kind="fact",
            **kw,
        ),
    )[0]
    Relationship.objects.create(
        org_id=principal.org_id,
        subject=subject,
        predicate=predicate,
        object_entity=obj,
        statement=row,
        visibility=row.visibility,
        team=row.team,
    )
    return row


def test_communities_list_uncovered_visible_members_and_skip_temporal_recalls(
    world, trip
):
    alice, bob = world.principal("alice"), world.principal("bob")
    names = ["Caroline", "Mel", "Boston", "Kiln Club"]
    ent = _entities(world, names)
    _fact(alice, ent["Caroline"], "friend_of", ent["Mel"])
    _fact(alice, ent["Mel"], "lives_in", ent["Boston"])
    hidden = _fact(bob, ent["Boston"], "hosts", ent["Kiln Club"], visibility="team")
    assert communities_recompute(world.acme.pk) == 1
    body = recall(
        client_for(world, "alice"),
        query="Who is Caroline friends with?",
        budget_tokens=60,
    ).json()
    members = [m for c in body["communities"] for m in c["members"]]
    packed = {i["id"] for i in body["items"]}
    assert members and all(m["statement_id"] not in packed for m in members)
    assert hidden.pk not in [m["statement_id"] for m in members]
    assert sum(c["tokens"] for c in body["communities"]) <= 256
    temporal = recall(
        client_for(world, "alice"), query="What did Caroline do last week?"
    ).json()
    assert temporal["communities"] == []
    assert "communities_skipped" in [d["code"] for d in temporal["degradations"]]


def test_communities_cost_the_same_queries_however_many_are_listed(world, trip):
    alice = world.principal("alice")
    ent = _entities(world, ["Caroline", "Mel", "Boston", "Dana", "Lisbon"])
    _fact(alice, ent["Caroline"], "friend_of", ent["Mel"])
    _fact(alice, ent["Mel"], "lives_in", ent["Boston"])
    _fact(alice, ent["Dana"], "moved_to", ent["Lisbon"])
    assert communities_recompute(world.acme.pk) == 2
    scope = Scope(principal=alice, tiers=("raw", "episodic", "semantic"))

    def listed(names):
        with CaptureQueriesContext(connection) as ctx:
            out = communities_for_pack(
                scope,
                entity_ids=[ent[n].pk for n in names],
                item_ids=[],
                budget_tokens=256,
                count_tokens=lambda text: len(text.split()),
            )
        return out, len(ctx.captured_queries)

    one, one_queries = listed(["Caroline"])
    two, two_queries = listed(["Caroline", "Dana"])
    assert len(one) == 1 and len(two) == 2
    assert {m["text"] for c in two for m in c["members"]} >= {"Dana moved_to Lisbon"}
    assert two_queries == one_queries  # one read of relationships for all communities


def test_an_org_without_communities_pays_no_community_queries(world, trip):
    alice = world.principal("alice")
    recall_run(alice, RecallRequest(query="warm up", record_event=False))
    with CaptureQueriesContext(connection) as ctx:
        pack = recall_run(alice, RecallRequest(query="Caroline pottery"))
    assert pack.items and pack.communities == []
    sql = [q["sql"] for q in ctx.captured_queries]
    assert not [q for q in sql if "memory_mention" in q]  # the store probe said none


def test_suggested_actions_offer_feedback_and_resolving_open_conflicts(world, trip):
    row = trip["rows"][0]
    other = remember(
        world.principal("alice"),
        MemoryInput(content="Caroline went to the pottery workshop in Chicago"),
    )[0]
    conflict = Conflict.objects.create(org=world.acme, kind="fact_conflict")
    ConflictAlternative.objects.create(conflict=conflict, memory=row)
    ConflictAlternative.objects.create(conflict=conflict, memory=other)
    body = recall(
        client_for(world, "alice"), query="Where did Caroline do pottery?"
    ).json()
    actions = body["suggested_actions"]
    assert actions[0]["path"] == f"/api/v1/recall/{body['recall_id']}/feedback"
    resolve = [a for a in actions if a["action"] == "resolve_conflict"]
    assert resolve and resolve[0]["path"] == f"/api/v1/conflicts/{conflict.pk}/resolve"
    assert row.pk in resolve[0]["memory_ids"]
    outsider = Principal.for_user(world.carol)
    assert recall_run(outsider, RecallRequest(query="Caroline pottery")).items == []


def test_every_new_option_is_in_the_openapi_schema(world):
    schema = client_for(world, "alice").get("/api/schema/?format=json").json()
    props = schema["components"]["schemas"]["RecallInRequest"]["properties"]
    for name in (
        "session",
        "prefer_current_session",
        "include_rules",
        "include_lessons",
        "reference_ids",
        "include_working_memory",
        "recency_fallback",
        "budget_level",
        "env_tags",
        "altitude",
        "min_relevance",
        "communities_budget_tokens",
    ):
        assert name in props and props[name].get("description"), name
    out = schema["components"]["schemas"]["RecallOut"]["properties"]
    for name in (
        "no_match",
        "fallback",
        "not_found",
        "working_memory",
        "communities",
        "suggested_actions",
        "controls",
    ):
        assert name in out, name


def test_the_presence_probe_of_an_absent_kind_reads_one_index_entry(world):
    """Phase 3's probe (chunks, artifacts) on a tenant full of raw messages, planned
    generically as ``lookup_rows`` plans it: every column it tests is in the index it
    reads, so an absent kind costs one index descent, not a pass over the raw rows
    (148 ms for the 1M corpus's largest tenant when the plan read
    ``memory_org_tier_status`` and tested each row's kind; session 23)."""
    alice = world.principal("alice")
    [seed] = remember(alice, MemoryInput(content="The kiln is in the shed"))
    with connection.cursor() as c:
        c.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'memory_memory' AND is_generated = 'NEVER' "
            "AND column_name NOT IN ('id', 'org_id')"
        )
        cols = [r[0] for r in c.fetchall()]
    exprs = {
        "seq": "m.seq + g",
        "content_sha256": "md5(g::text)",
        "idempotency_key": "NULL",
    }
    # 40 other tenants beside alice's (30% of the rows), as the bench's Zipf orgs.
    others = [
        Organization.objects.create(name=f"T{i}", slug=f"probe-plan-{i}").pk
        for i in range(40)
    ]
    select = ", ".join(exprs.get(col, f"m.{col}") for col in cols)
    # 30% of the rows stay in alice's org, the rest go round the others.
    org = "CASE WHEN g %% 10 < 3 THEN m.org_id ELSE (%s::bigint[])[1 + g %% 40] END"
    with rls.scoped(system=True, reason="test rows"), connection.cursor() as c:
        c.execute(
            f"INSERT INTO memory_memory (org_id, {', '.join(cols)}) "
            f"SELECT {org}, {select} "
            "FROM memory_memory m, generate_series(1, 20000) g WHERE m.id = %s",
            [others, seed.pk],
        )
        c.execute("ANALYZE memory_memory")
    scope = Scope(principal=alice, tiers=PHASE_TIERS[3], kinds=PHASE_KINDS[3])
    where, params = eligibility_sql(scope)
    numbered = iter(range(1, len(params) + 1))
    sql = re.sub(
        "%s",
        lambda _: f"${next(numbered)}",
        f"SELECT EXISTS (SELECT 1 FROM memory_memory m WHERE {where})",
    )
    with transaction.atomic(), psycopg.ClientCursor(connection.connection) as c:
        activate_principal(alice)
        c.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        c.execute(f"PREPARE probe AS {sql}")
        values = c.mogrify(", ".join(["%s"] * len(params)), params)
        c.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE probe({values})")
        plan = c.fetchone()[0]
        c.execute("DEALLOCATE probe")
    assert "memory_org_kind_tier_status" in str(plan), json.dumps(plan, indent=1)
    # The old plan read ~3,400 buffers for 20k raw rows of a tenant (69,630 at 1M).
    assert plan[0]["Plan"]["Shared Hit Blocks"] < 20


def test_a_scope_spells_its_tiers_and_kinds_as_literals_and_refuses_other_names(world):
    alice = world.principal("alice")
    where, params = eligibility_sql(
        Scope(principal=alice, tiers=("raw",), kinds=("chunk", "artifact"))
    )
    assert "m.tier IN ('raw')" in where and "m.kind IN ('chunk', 'artifact')" in where
    for bad in (
        Scope(principal=alice, tiers=("raw') OR TRUE --",)),
        Scope(principal=alice, tiers=("raw",), kinds=("Chunk",)),
        Scope(principal=alice, tiers=()),
    ):
        with pytest.raises(ValueError, match="not tier or kind names"):
            eligibility_sql(bad)
