"""Recall end to end: packs, explain, citations, leaks, bitemporal views, degrading."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memory import services
from memory.models import Memory
from memory.services import MemoryInput
from recall.models import RecallEvent
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def remember(principal, *items, session=None):
    result = services.memory_remember(
        principal=principal, items=list(items), session=session, enqueue=False
    )
    services.memory_embed(ids=[m.pk for m in result.memories])
    return result.memories


@pytest.fixture
def stocked(world):
    """Acme: org-wide conversation, team A and B secrets, a private note; Globex."""
    alice, bob, agent = (world.principal(n) for n in ("alice", "bob", "agent_a"))
    session = services.session_create(
        principal=alice, external_id="trip", visibility="org"
    )
    remember(
        alice,
        MemoryInput(
            content="Caroline went to the pottery workshop in Boston",
            speaker="Caroline",
            occurred_at=timezone.now() - timedelta(days=3),
        ),
        MemoryInput(
            content="It was lovely, she made a blue bowl",
            speaker="Mel",
            occurred_at=timezone.now() - timedelta(days=3),
        ),
        session=session,
    )
    secrets = {
        "team_b": remember(
            bob,
            MemoryInput(content="Caroline pottery secret of team B", visibility="team"),
        )[0],
        "alice_private": remember(
            alice,
            MemoryInput(
                content="Caroline pottery private diary of alice", visibility="private"
            ),
        )[0],
        "globex": remember(
            world.principal("carol"),
            MemoryInput(content="Caroline pottery globex confidential"),
        )[0],
    }
    fact = remember(
        agent,
        MemoryInput(
            content="Caroline likes pottery",
            tier="semantic",
            kind="fact",
            visibility="org",
        ),
    )[0]
    return {"session": session, "secrets": secrets, "fact": fact}


def recall(client, **body):
    return client.post("/api/v1/recall", {"budget_tokens": 2000, **body}, format="json")


def test_recall_returns_a_budgeted_pack_with_explain_and_citations(world, stocked):
    r = recall(client_for(world, "agent_a"), query="Where did Caroline go for pottery?")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (
        body["recall_id"] and RecallEvent.objects.filter(pk=body["recall_id"]).exists()
    )
    contents = [i["content"] for i in body["items"]]
    assert "Caroline went to the pottery workshop in Boston" in contents
    assert body["total_tokens"] <= 2000
    assert body["total_tokens"] == sum(i["tokens"] for i in body["items"])
    top = body["items"][0]
    assert top["untrusted"] is True
    assert set(top["explain"]) >= {
        "phase",
        "channels",
        "weights",
        "boosts",
        "penalties",
        "graph_path",
        "window_match",
        "why_packed",
    }
    for channel in top["explain"]["channels"].values():
        assert {"rank", "score", "rrf", "share", "weight"} <= set(channel)
    message = next(i for i in body["items"] if i["content"].startswith("Caroline went"))
    assert message["citations"][0]["id"] == message["id"]
    assert body["phase_reached"] in (1, 2, 3)
    assert "phase1" in body["coverage"]
    assert body["intent"]["answer_type"] == "place"
    assert "Caroline" in body["intent"]["entities"]
    assert {"total", "embed", "pack"} <= set(body["timings_ms"])


def test_a_tight_budget_is_never_exceeded_and_omissions_are_reported(world, stocked):
    body = recall(
        client_for(world, "alice"), query="Caroline pottery", budget_tokens=12
    ).json()
    assert body["total_tokens"] <= 12
    assert body["omitted"], "something must be reported as omitted"
    assert {o["reason"] for o in body["omitted"]} <= {
        "budget",
        "limit",
        "covered_by_digest",
        "digest_overlaps_rows",
        "duplicate",
        "duplicate_of",
    }


@pytest.mark.parametrize(
    "persona, forbidden",
    [
        ("alice", {"team_b", "globex"}),
        ("bob", {"alice_private", "globex"}),
        ("agent_a", {"team_b", "alice_private", "globex"}),
        ("vera", {"team_b", "alice_private", "globex"}),
        ("carol", {"team_b", "alice_private"}),
    ],
)
@pytest.mark.parametrize("mode", ["cascade", "direct"])
def test_no_channel_and_no_field_ever_leaks_rows_the_persona_may_not_see(
    world, stocked, persona, forbidden, mode
):
    client = client_for(world, persona)
    forbidden_ids = {stocked["secrets"][n].pk for n in forbidden}
    forbidden_text = {stocked["secrets"][n].content for n in forbidden}
    for query in [
        "Caroline pottery secret",
        "pottery diary",
        "globex confidential",
        "What did Caroline do last week?",
    ]:
        r = recall(
            client,
            query=query,
            mode=mode,
            entities=["Caroline"],
            weights={"graph": 0.5, "temporal": 1.0, "recency": 0.5},
        )
        assert r.status_code == 200, r.content
        dump = json.dumps(r.json())
        for text in forbidden_text:
            assert text not in dump
        ids = {i["id"] for i in r.json()["items"]}
        ids |= {c["id"] for i in r.json()["items"] for c in i["citations"]}
        ids |= {o["id"] for o in r.json()["omitted"]}
        assert not ids & forbidden_ids
        for item in r.json()["items"]:
            for node in item["explain"]["graph_path"] or []:
                if node.startswith("m:"):
                    assert int(node[2:]) not in forbidden_ids
    for path in ("/api/v1/search", "/api/v1/similar"):
        r = client.post(
            path, {"query": "Caroline pottery secret diary confidential"}, format="json"
        )
        assert r.status_code == 200
        assert not {x["id"] for x in r.json()["results"]} & forbidden_ids


def test_a_non_member_and_anonymous_cannot_recall(world, stocked):
    assert recall(client_for(world, "nora"), query="pottery").status_code == 403
    assert recall(client_for(world, "anonymous"), query="pottery").status_code in (
        401,
        403,
    )


def test_bitemporal_views_show_what_was_true_and_known_then(world, stocked):
    agent = world.principal("agent_a")
    old = stocked["fact"]
    two_weeks_ago = timezone.now() - timedelta(days=14)
    Memory.objects.filter(pk=old.pk).update(recorded_at=two_weeks_ago)
    new = services.memory_supersede(
        principal=agent,
        memory_id=old.pk,
        correction=MemoryInput(
            content="Caroline gave up pottery and took up painting",
            tier="semantic",
            kind="fact",
        ),
    )
    services.memory_embed(ids=[new.pk])
    yesterday = timezone.now() - timedelta(days=1)
    Memory.objects.filter(pk=old.pk).update(superseded_at=yesterday)
    Memory.objects.filter(pk=new.pk).update(recorded_at=yesterday)
    client = client_for(world, "agent_a")
    q = {
        "query": "What hobby does Caroline like, pottery or painting?",
        "tiers": ["semantic"],
    }

    now_ids = {i["id"] for i in recall(client, **q).json()["items"]}
    assert new.pk in now_ids and old.pk not in now_ids
    last_week = (timezone.now() - timedelta(days=7)).isoformat()
    as_of = recall(client, **q, as_of=last_week).json()["items"]
    assert old.pk in {i["id"] for i in as_of} and new.pk not in {i["id"] for i in as_of}
    stale = next(i for i in as_of if i["id"] == old.pk)
    assert stale["explain"]["penalties"] == {"stale": 0.5}
    known = recall(
        client, **q, known_at=(yesterday - timedelta(hours=1)).isoformat()
    ).json()
    assert [i["id"] for i in known["items"]] == [old.pk]


def test_retracted_rows_never_come_back_in_the_current_view(world, stocked):
    agent = world.principal("agent_a")
    services.memory_retract(principal=agent, memory_id=stocked["fact"].pk)
    body = recall(client_for(world, "agent_a"), query="Caroline likes pottery").json()
    assert stocked["fact"].pk not in {i["id"] for i in body["items"]}


def test_without_an_embedder_recall_degrades_to_lexical_and_strict_fails(
    world, stocked, settings
):
    from memory import embeddings

    settings.MNEMO_EMBEDDING_ENABLED = False
    embeddings._query_cache.clear()
    client = client_for(world, "alice")
    body = recall(client, query="pottery workshop Boston").json()
    assert body["items"], "lexical results still come back"
    assert body["degradations"][0]["code"] == "embedder_unavailable"
    assert body["degradations"][0]["channel"] == "vector"
    r = recall(client, query="pottery workshop Boston", strict=True)
    assert r.status_code == 503
    assert r.json()["field"] == "vector"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "budget_tokens": 40000}, "budget_tokens"),
        ({"query": "x", "mode": "sideways"}, "mode"),
        ({"query": "x", "weights": {"telepathy": 1}}, "weights"),
        ({"query": "x", "as_of": "last tuesday"}, "as_of"),
        ({"query": "x", "tiers": ["cosmic"]}, "tiers"),
        ({"query": "x", "speaker_boost": 0.5}, "speaker_boost"),
        ({"query": "x", "window_boost": 9}, "window_boost"),
    ],
)
def test_bad_recall_requests_get_a_400_naming_the_field(world, body, field):
    r = client_for(world, "alice").post("/api/v1/recall", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["field"].startswith(field)


def test_a_named_speaker_s_own_turns_outrank_turns_addressing_them(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="chat", visibility="org"
    )
    when = timezone.now() - timedelta(days=2)
    addressed, own = remember(
        alice,
        MemoryInput(
            content="Thanks Melanie, your kids sound lovely!",
            speaker="Caroline",
            occurred_at=when,
        ),
        MemoryInput(
            content="The kids were stoked about the dinosaur exhibit at the museum.",
            speaker="Melanie",
            occurred_at=when + timedelta(minutes=5),
        ),
        session=session,
    )
    client = client_for(world, "alice")
    body = recall(client, query="What do Melanie's kids like?").json()
    ids = [i["id"] for i in body["items"]]
    assert ids.index(own.pk) < ids.index(addressed.pk)
    top = body["items"][0]
    assert top["id"] == own.pk and top["explain"]["boosts"]["speaker"] == 1.2
    # The name is not a full-text term: only "kids" is matched lexically.
    lexical = {i["id"]: i["explain"]["channels"].get("lexical") for i in body["items"]}
    assert lexical[addressed.pk]["detail"]["matched_terms"] == 1
    off = recall(client, query="What do Melanie's kids like?", speaker_boost=1.0).json()
    assert all("speaker" not in i["explain"]["boosts"] for i in off["items"])


def test_rows_inside_the_query_window_take_the_window_boost(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="diary", visibility="org"
    )
    now = timezone.now()
    old, recent = remember(
        alice,
        MemoryInput(
            content="I signed up for a pottery class downtown",
            occurred_at=now - timedelta(days=200),
        ),
        MemoryInput(
            content="I signed up for a pottery class near the river",
            occurred_at=now - timedelta(days=7),
        ),
        session=session,
    )
    client = client_for(world, "alice")
    query = "What class did I sign up for a week ago?"
    body = recall(client, query=query).json()
    assert body["intent"]["window"]["phrase"] == "a week ago"
    ids = [i["id"] for i in body["items"]]
    assert ids.index(recent.pk) < ids.index(old.pk)
    boosts = {i["id"]: i["explain"]["boosts"] for i in body["items"]}
    assert boosts[recent.pk]["window"] == 1.5 and "window" not in boosts[old.pk]
    off = recall(client, query=query, window_boost=1.0).json()
    assert all("window" not in i["explain"]["boosts"] for i in off["items"])


def test_trace_shows_lineage_up_and_down_within_visibility(world, stocked):
    agent = world.principal("agent_a")
    msg = Memory.objects.get(content__startswith="Caroline went")
    fact = remember(
        agent,
        MemoryInput(
            content="Caroline visited Boston",
            tier="semantic",
            kind="fact",
            derived_from=(msg.pk,),
        ),
    )[0]
    client = client_for(world, "agent_a")
    up = client.get(f"/api/v1/memories/{fact.pk}/trace").json()
    assert [n["id"] for n in up["up"]] == [msg.pk]
    assert up["stopped_reason"] == "complete"
    down = client.get(f"/api/v1/memories/{msg.pk}/trace").json()
    assert [n["id"] for n in down["down"]] == [fact.pk]
    assert (
        client_for(world, "carol").get(f"/api/v1/memories/{fact.pk}/trace").status_code
        == 404
    )
    body = recall(client, query="Did Caroline visit Boston?", tiers=["semantic"]).json()
    item = next(i for i in body["items"] if i["id"] == fact.pk)
    assert [c["id"] for c in item["citations"]] == [msg.pk]


def test_citations_are_capped_per_item_most_relevant_first(world):
    agent = world.principal("agent_a")
    turns = remember(
        agent,
        *[
            MemoryInput(content=f"Standup note {i}: the build pipeline is green.")
            for i in range(5)
        ],
        MemoryInput(content="The release train leaves on Friday at noon."),
    )
    digest = remember(
        agent,
        MemoryInput(
            content="Week summary: pipeline green all week; release train Friday.",
            tier="episodic",
            kind="episode",
            derived_from=tuple(m.pk for m in turns),
        ),
    )[0]
    client = client_for(world, "agent_a")
    query = "When does the release train leave?"

    def digest_item(**options):
        body = recall(client, query=query, tiers=["episodic"], **options).json()
        return next(i for i in body["items"] if i["id"] == digest.pk)

    capped = digest_item(max_citations=2)
    assert capped["citations_total"] == 6
    assert len(capped["citations"]) == 2
    # The turn sharing the query's words comes first.
    assert capped["citations"][0]["id"] == turns[-1].pk
    full = digest_item(max_citations=50)
    assert len(full["citations"]) == full["citations_total"] == 6
    assert len(digest_item()["citations"]) == 6  # the default, 6
    for bad in (0, 101, "many"):
        r = recall(client, query=query, max_citations=bad)
        assert r.status_code == 400, r.content
        assert r.json()["field"].startswith("max_citations")


def test_rows_holding_the_expected_answer_type_take_the_answer_type_boost(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="pottery", visibility="org"
    )
    vague, dated = remember(
        alice,
        MemoryInput(content="I finally went to the pottery class with my sister"),
        MemoryInput(content="I went to the pottery class on Thursday afternoon"),
        session=session,
    )
    client = client_for(world, "alice")
    query = "When did I go to the pottery class?"
    plain = recall(client, query=query).json()
    assert plain["intent"]["answer_type"] == "time"
    assert all("answer_type" not in i["explain"]["boosts"] for i in plain["items"])
    body = recall(client, query=query, answer_type_boost=3.0).json()
    ids = [i["id"] for i in body["items"]]
    assert ids.index(dated.pk) < ids.index(vague.pk)
    boosts = {i["id"]: i["explain"]["boosts"] for i in body["items"]}
    assert boosts[dated.pk]["answer_type"] == 3.0
    assert "answer_type" not in boosts[vague.pk]


def test_rows_waiting_for_an_embedding_degrade_vector_and_strict_says_503(world):
    from django.db import transaction

    from recall.services import recall_run
    from recall.types import RecallRequest, RecallUnavailable

    alice = world.principal("alice")
    remember(alice, MemoryInput(content="The kiln in the pottery studio is fixed"))
    waiting = services.memory_remember(
        principal=alice,
        items=[MemoryInput(content="The pottery studio moved to the harbour")],
        enqueue=False,
    ).memories[0]
    assert waiting.embedding_state != "ready"
    client = client_for(world, "alice")
    body = recall(client, query="Where is the pottery studio?").json()
    codes = {d["code"]: d for d in body["degradations"]}
    assert codes["vector_pending"]["channel"] == "vector"
    assert waiting.pk in [i["id"] for i in body["items"]]  # lexical still finds it
    r = recall(client, query="Where is the pottery studio?", strict=True)
    assert r.status_code == 503 and "vector" in r.json()["error"]
    # A strict failure leaves the caller's transaction usable (no savepoint is used).
    with transaction.atomic():
        with pytest.raises(RecallUnavailable):
            recall_run(alice, RecallRequest(query="pottery studio", strict=True))
        assert Memory.objects.filter(pk=waiting.pk).exists()


def test_an_episode_ranks_below_its_own_turns_when_they_are_candidates(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="kiln", visibility="org"
    )
    first, second = remember(
        alice,
        MemoryInput(content="The pottery kiln broke on Monday"),
        MemoryInput(content="We paid 300 dollars to repair the pottery kiln"),
        session=session,
    )
    episode = remember(
        alice,
        MemoryInput(
            content="Pottery kiln: the pottery kiln broke and the pottery kiln repair "
            "cost 300 dollars",
            tier="episodic",
            kind="episode",
            derived_from=(first.pk, second.pk),
        ),
    )[0]
    body = recall(client_for(world, "alice"), query="pottery kiln repair").json()
    ids = [i["id"] for i in body["items"]]
    assert {first.pk, second.pk, episode.pk} <= set(ids)  # the episode is kept
    assert ids.index(episode.pk) > max(ids.index(first.pk), ids.index(second.pk))
    explain = next(i["explain"] for i in body["items"] if i["id"] == episode.pk)
    assert 0 < explain["penalties"]["episode_below_turns"] < 1


def test_a_message_is_corroborated_by_an_observation_drawn_from_it(world):
    alice = world.principal("alice")
    session = services.session_create(
        principal=alice, external_id="garden", visibility="org"
    )
    backed, alone = remember(
        alice,
        MemoryInput(content="I planted tomatoes and basil in the raised garden bed"),
        MemoryInput(content="The raised garden bed needs new soil and tomatoes"),
        session=session,
    )
    observation = remember(
        alice,
        MemoryInput(
            content="user planted tomatoes and basil in the raised garden bed.",
            tier="episodic",
            kind="observation",
            derived_from=(backed.pk,),
        ),
    )[0]
    client = client_for(world, "alice")
    body = recall(client, query="tomatoes in the raised garden bed").json()
    explain = {i["id"]: i["explain"] for i in body["items"]}
    assert {backed.pk, alone.pk, observation.pk} <= set(explain)
    assert explain[backed.pk]["boosts"]["corroborated"] > 1
    assert explain[backed.pk]["corroborated_by"] == observation.pk
    assert "corroborated" not in explain[alone.pk]["boosts"]
    assert "corroborated" not in explain[observation.pk]["boosts"]
    off = recall(
        client, query="tomatoes in the raised garden bed", corroboration_share=0
    )
    assert all(
        "corroborated" not in i["explain"]["boosts"] for i in off.json()["items"]
    )
    bad = recall(client, query="tomatoes", corroboration_share=-1)
    assert bad.status_code == 400 and "corroboration_share" in bad.text


def test_a_row_the_caller_may_not_see_never_corroborates(world):
    alice = world.principal("alice")
    message = remember(
        alice, MemoryInput(content="The greenhouse heater failed during the frost")
    )[0]
    hidden = remember(
        world.principal("bob"),
        MemoryInput(
            content="user says the greenhouse heater failed during the frost.",
            tier="episodic",
            kind="observation",
            visibility="private",
            derived_from=(message.pk,),
        ),
    )[0]
    body = recall(client_for(world, "alice"), query="greenhouse heater frost").json()
    ids = [i["id"] for i in body["items"]]
    assert message.pk in ids and hidden.pk not in ids
    explain = next(i["explain"] for i in body["items"] if i["id"] == message.pk)
    assert "corroborated" not in explain["boosts"]
    assert "corroborated_by" not in explain
    # Bob sees both, and his observation backs the message for him.
    mine = recall(client_for(world, "bob"), query="greenhouse heater frost").json()
    explain = next(i["explain"] for i in mine["items"] if i["id"] == message.pk)
    assert explain["corroborated_by"] == hidden.pk


def test_recall_input_fields_are_per_request_and_validate_like_deep_copies():
    """RecallIn's shallow field copies (memory.api.serializers.BuiltOnceFieldsMixin)
    give each request its own bound fields and the same data and errors as DRF's deep
    copies."""
    from rest_framework import serializers

    from recall.api import RecallIn

    class DeepRecallIn(RecallIn):
        def get_fields(self):
            return serializers.Serializer.get_fields(self)

    good = {"query": "budget plan", "tiers": ["raw"], "weights": {"vector": 2}}
    bad = {"query": "", "tiers": ["cosmic"], "limit": 0, "weights": {"x": -1}}
    for body in (good, bad):
        fast, deep = RecallIn(data=body), DeepRecallIn(data=body)
        assert fast.is_valid() == deep.is_valid()
        assert fast.errors == deep.errors
        if not fast.errors:
            assert fast.validated_data == deep.validated_data
    one, two = RecallIn(data=good), RecallIn(data=good)
    assert one.fields["tiers"] is not two.fields["tiers"]
    assert one.fields["tiers"].parent is one and two.fields["tiers"].parent is two
    declared = RecallIn._declared_fields["tiers"]
    assert getattr(declared, "parent", None) is None  # the class's field is never bound
