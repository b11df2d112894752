"""The recall feedback loop: verdicts, outcomes, reinforcement, export and replay."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from memory import services
from memory.models import Memory
from memory.services import MemoryInput
from recall import feedback
from recall.models import AgentRecallSettings, Feedback, RecallConfig
from recall.services import recall_run
from recall.types import RecallRequest
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def remember(principal, *items):
    rows = services.memory_remember(
        principal=principal, items=list(items), enqueue=False
    ).memories
    services.memory_embed(ids=[m.pk for m in rows])
    return rows


@pytest.fixture
def facts(world):
    """Org-wide facts about Caroline, a team B secret and a Globex row."""
    alice = world.principal("alice")
    rows = remember(
        alice,
        *(
            MemoryInput(content=text, tier="semantic", kind="fact", visibility="org")
            for text in (
                "Caroline lives in Boston near the harbour.",
                "Caroline works as a potter in Boston.",
                "Caroline has a dog called Biscuit.",
            )
        ),
    )
    secret = remember(
        world.principal("bob"),
        MemoryInput(content="Caroline team B secret", visibility="team"),
    )[0]
    globex = remember(world.principal("carol"), MemoryInput(content="Globex Caroline"))[
        0
    ]
    return {"rows": rows, "secret": secret, "globex": globex}


def run_recall(client, query="Where does Caroline live in Boston?"):
    r = client.post("/api/v1/recall", {"query": query, "limit": 10}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def post_feedback(client, recall_id, **body):
    return client.post(f"/api/v1/recall/{recall_id}/feedback", body, format="json")


@pytest.mark.parametrize("verdict", ["helpful", "irrelevant", "wrong", "outdated"])
def test_each_item_verdict_is_recorded_for_review_and_changes_nothing(
    world, facts, verdict
):
    client = client_for(world, "agent_a")
    pack = run_recall(client)
    item = pack["items"][0]["id"]
    r = post_feedback(
        client,
        pack["recall_id"],
        verdict=verdict,
        memory_id=item,
        comment="<b>checked</b>",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["verdict"] == verdict and body["memory_id"] == item
    assert body["review_status"] == "new"
    assert body["author"] == f"agent:{world.agent_a.pk}"
    assert Memory.objects.get(pk=item).reinforcement == {}
    again = [i["id"] for i in run_recall(client)["items"]]
    assert again == [i["id"] for i in pack["items"]]


def test_feedback_on_the_whole_recall_and_missing_rows(world, facts):
    client = client_for(world, "alice")
    pack = run_recall(client, "Caroline's dog")
    rid = pack["recall_id"]
    assert post_feedback(client, rid, verdict="irrelevant").status_code == 201
    harbour = facts["rows"][0].pk
    r = post_feedback(client, rid, verdict="missing", expected_memory_id=harbour)
    assert r.status_code == 201, r.content
    assert r.json()["expected_memory_id"] == harbour
    r = post_feedback(client, rid, verdict="missing")
    assert r.status_code == 400 and r.json()["field"] == "expected_memory_id"


@pytest.mark.parametrize("row", ["secret", "globex"])
def test_missing_row_the_caller_cannot_see_is_a_404_on_that_field(world, facts, row):
    client = client_for(world, "alice")
    rid = run_recall(client)["recall_id"]
    r = post_feedback(client, rid, verdict="missing", expected_memory_id=facts[row].pk)
    nowhere = post_feedback(client, rid, verdict="missing", expected_memory_id=10**9)
    assert r.status_code == nowhere.status_code == 404
    assert r.json()["field"] == "expected_memory_id"
    assert r.json()["error"].replace(str(facts[row].pk), "N") == nowhere.json()[
        "error"
    ].replace(str(10**9), "N")
    assert not Feedback.objects.exists()


def test_an_item_that_was_not_in_the_recall_is_a_400(world, facts):
    client = client_for(world, "alice")
    r = client.post(
        "/api/v1/recall", {"query": "Caroline's dog", "limit": 1}, format="json"
    )
    pack = r.json()
    packed = [i["id"] for i in pack["items"]]
    outside = next(m.pk for m in facts["rows"] if m.pk not in packed)
    for memory_id in (outside, facts["secret"].pk):
        r = post_feedback(
            client, pack["recall_id"], verdict="wrong", memory_id=memory_id
        )
        assert r.status_code == 400 and r.json()["field"] == "memory_id"
    r = post_feedback(client, pack["recall_id"], verdict="bogus")
    assert r.status_code == 400 and r.json()["field"] == "verdict"


@pytest.mark.parametrize("persona", ["carol", "bob", "agent_globex"])
def test_a_recall_you_cannot_see_is_exactly_like_a_missing_one(world, facts, persona):
    rid = run_recall(client_for(world, "alice"))["recall_id"]
    client = client_for(world, persona)
    theirs = post_feedback(client, rid, verdict="helpful")
    missing = post_feedback(client, 10**9, verdict="helpful")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    outcome = client.post(
        f"/api/v1/recall/{rid}/outcome",
        {"answer": "x", "outcome": "success"},
        format="json",
    )
    assert outcome.status_code == 404


def test_admins_and_viewers_may_give_feedback_on_recalls_they_can_see(world, facts):
    rid = run_recall(client_for(world, "agent_a"))["recall_id"]
    assert (
        post_feedback(client_for(world, "olivia"), rid, verdict="helpful").status_code
        == 201
    )
    vera = client_for(world, "vera")
    own = run_recall(vera)["recall_id"]
    assert post_feedback(vera, own, verdict="helpful").status_code == 201
    assert post_feedback(vera, rid, verdict="helpful").status_code == 404
    assert (
        post_feedback(client_for(world, "nora"), rid, verdict="helpful").status_code
        == 403
    )
    assert post_feedback(
        client_for(world, "anonymous"), rid, verdict="helpful"
    ).status_code in (401, 403)


# --- outcomes -------------------------------------------------------------------------


def post_outcome(client, recall_id, **body):
    body = {"answer": "She lives in Boston.", "outcome": "success", **body}
    return client.post(f"/api/v1/recall/{recall_id}/outcome", body, format="json")


def test_outcomes_are_refused_until_the_agent_opts_in(world, facts):
    agent = client_for(world, "agent_a")
    rid = run_recall(agent)["recall_id"]
    r = post_outcome(agent, rid)
    assert r.status_code == 403 and "record_outcomes" in r.json()["error"]
    alice = client_for(world, "alice")
    r = post_outcome(alice, run_recall(alice)["recall_id"])
    assert r.status_code == 403  # people are not agents; nothing to opt in
    assert not Memory.objects.filter(kind="episode").exists()


def test_an_opted_in_agent_records_its_answer_as_an_episode(world, facts):
    AgentRecallSettings.objects.create(agent=world.agent_a, record_outcomes=True)
    agent = client_for(world, "agent_a")
    pack = run_recall(agent)
    r = post_outcome(agent, pack["recall_id"], outcome="partial", note="no street")
    assert r.status_code == 201, r.content
    episode = Memory.objects.get(pk=r.json()["memory_id"])
    assert (episode.tier, episode.kind) == ("episodic", "episode")
    assert "She lives in Boston." in episode.content
    assert episode.metadata["recall_id"] == pack["recall_id"]
    assert episode.metadata["outcome"] == "partial"
    packed = sorted(i["id"] for i in pack["items"])
    assert sorted(episode.derived_from.values_list("id", flat=True)) == packed
    assert r.json()["derived_from"] == packed
    again = post_outcome(agent, pack["recall_id"])
    assert again.status_code == 409
    bad = post_outcome(agent, run_recall(agent)["recall_id"], outcome="great")
    assert bad.status_code == 400 and bad.json()["field"] == "outcome"


# --- reinforcement --------------------------------------------------------------------


def ranked(principal, query="Caroline Boston"):
    pack = recall_run(
        principal, RecallRequest(query=query, limit=10, record_event=False)
    )
    return [i.id for i in pack.items], pack


def reinforce(world, principal, memory_id):
    event_pack = recall_run(principal, RecallRequest(query="Caroline Boston", limit=10))
    fb = feedback.feedback_submit(
        principal=principal,
        recall_id=event_pack.recall_id,
        verdict="helpful",
        memory_id=memory_id,
    )
    feedback.feedback_accept(
        principal=world.principal("olivia"),
        user=world.olivia,
        feedback_id=fb.pk,
        action="reinforce",
        note="confirmed",
    )


def test_reinforcement_weight_zero_changes_nothing_and_above_zero_boosts(world, facts):
    alice = world.principal("alice")
    before, _ = ranked(alice)
    assert len(before) >= 2
    last = before[-1]
    reinforce(world, alice, last)
    assert Memory.objects.get(pk=last).reinforcement == {"accepted": 1}
    assert ranked(alice)[0] == before  # accepted, but the org's weight is 0
    config = RecallConfig.objects.create(org=world.acme, reinforcement_weight=0.0)
    assert ranked(alice)[0] == before
    assert feedback.reinforcement_multipliers(world.acme.pk, before) == {}
    config.reinforcement_weight = 2.0
    config.save()
    after, pack = ranked(alice)
    assert after.index(last) < before.index(last)
    item = next(i for i in pack.items if i.id == last)
    assert item.explain["boosts"]["reinforcement"] == pytest.approx(
        feedback.reinforcement_factor(2.0, 1)
    )
    # another org's weight never applies here
    RecallConfig.objects.create(org=world.globex, reinforcement_weight=5.0)
    assert feedback.reinforcement_multipliers(world.globex.pk, before) == {}


def test_successful_outcomes_count_as_reinforcement(world, facts):
    AgentRecallSettings.objects.create(agent=world.agent_a, record_outcomes=True)
    RecallConfig.objects.create(org=world.acme, reinforcement_weight=1.0)
    agent = world.principal("agent_a")
    pack = recall_run(agent, RecallRequest(query="Caroline dog Biscuit", limit=2))
    ids = [i.id for i in pack.items]
    assert feedback.reinforcement_multipliers(world.acme.pk, ids) == {}
    feedback.outcome_record(
        principal=agent, recall_id=pack.recall_id, answer="Biscuit", outcome="success"
    )
    boosts = feedback.reinforcement_multipliers(world.acme.pk, ids)
    assert set(boosts) == set(ids)
    assert boosts[ids[0]]["reinforcement"] == pytest.approx(1 + 0.6931, abs=1e-3)


# --- export and replay ----------------------------------------------------------------


@pytest.mark.parametrize("persona", ["alice", "vera", "agent_a", "carol", "nora"])
def test_only_org_admins_export_feedback(world, persona):
    r = client_for(world, persona).get("/api/v1/feedback/export")
    assert r.status_code == 403


def test_export_lists_accepted_feedback_as_replayable_cases(world, facts, tmp_path):
    alice = world.principal("alice")
    pack = recall_run(alice, RecallRequest(query="Caroline's dog", limit=5))
    dog = facts["rows"][2].pk
    harbour = facts["rows"][0].pk
    olivia = world.principal("olivia")
    fbs = [
        feedback.feedback_submit(
            principal=alice,
            recall_id=pack.recall_id,
            verdict="missing",
            expected_memory_id=harbour,
        ),
        feedback.feedback_submit(
            principal=alice,
            recall_id=pack.recall_id,
            verdict="helpful",
            memory_id=pack.items[0].id,
        ),
        feedback.feedback_submit(
            principal=alice,
            recall_id=pack.recall_id,
            verdict="wrong",
            memory_id=pack.items[0].id,
        ),
    ]
    for fb in fbs[:2]:
        feedback.feedback_accept(
            principal=olivia, user=world.olivia, feedback_id=fb.pk, action="none"
        )
    feedback.feedback_reject(principal=olivia, user=world.olivia, feedback_id=fbs[2].pk)
    r = client_for(world, "olivia").get("/api/v1/feedback/export")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["org"] == "acme" and len(body["cases"]) == 1
    case = body["cases"][0]
    assert case["query"] == "Caroline's dog" and case["principal"] == alice.label
    assert case["expected_ids"] == [harbour, pack.items[0].id]
    assert case["unwanted_ids"] == []  # the rejected verdict is not exported
    assert dog in [i.id for i in pack.items]

    out = tmp_path / "set.json"
    call_command("export_feedback", "--org", "acme", "--out", str(out))
    assert (
        json.loads(out.read_text())["cases"][0]["expected_ids"] == case["expected_ids"]
    )
    from io import StringIO

    stdout = StringIO()
    call_command("replay_feedback", str(out), stdout=stdout, stderr=StringIO())
    text = stdout.getvalue()
    assert "1 case(s) replayed" in text and "hit@10" in text and "mrr" in text


def test_a_replayed_case_naming_an_unknown_kind_is_refused_with_its_name(
    world, tmp_path
):
    """Scopes spell their tiers and kinds into the SQL (recall/scope.py), so a feedback
    set, which is a file anyone may hand the command, is checked against the model's
    names before a recall runs."""
    from django.core.management.base import CommandError

    out = tmp_path / "set.json"
    call_command("export_feedback", "--org", "acme", "--out", str(out))
    data = json.loads(out.read_text())
    data["cases"] = [
        {
            "recall_id": 1,
            "query": "dog",
            "principal": world.principal("alice").label,
            "params": {"kinds": ["fact", "x') OR TRUE --"]},
            "expected_ids": [1],
        }
    ]
    out.write_text(json.dumps(data))
    with pytest.raises(
        CommandError, match=r"kinds: unknown names \[\"x'\) OR TRUE --\"\]"
    ):
        call_command("replay_feedback", str(out), stdout=None, stderr=None)
