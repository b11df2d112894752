"""Recall playground: admins run recall as any principal of the org, audited; the
explain table, the chart and feedback from the page; everyone else is refused."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.services import memory_embed
from recall.models import Feedback, RecallEvent
from tests.ui.conftest import XSS

URL = "/playground/"


def run(client, who: str, query: str = "Where does Caroline live?", **extra):
    return client.post(
        URL, {"as_principal": who, "query": query, "explain": "on", **extra}
    )


@pytest.fixture
def embedded(console):
    from memory.models import Memory

    memory_embed(ids=list(Memory.objects.values_list("id", flat=True)))
    return console


def test_admin_sees_the_form_with_every_principal_of_the_org(console, login):
    r = login("olivia").get(URL)
    assert r.status_code == 200
    html = r.content.decode()
    w = console.world
    for value in (f"user:{w.alice.pk}", f"user:{w.vera.pk}", f"agent:{w.agent_a.pk}"):
        assert f'value="{value}"' in html
    assert f"user:{w.carol.pk}" not in html and f"agent:{w.agent_globex.pk}" not in html
    for name in (
        "budget_tokens",
        "limit",
        "tiers",
        "kinds",
        "entities",
        "sessions",
        "occurred_after",
        "occurred_before",
        "as_of",
        "known_at",
        "reference_time",
        "rank_by",
        "mode",
        "weight_vector",
        "weight_recency",
        "strict",
        "explain",
        "phase1_strategy",
        "answer_type_boost",
        "variant_styles",
        "neighbor_share",
        "corroboration_share",
        "window_boost",
    ):
        assert f'name="{name}"' in html, name
    assert reverse("ui:playground") in html  # nav link for admins


def test_running_as_an_agent_shows_pack_explain_chart_and_is_audited(embedded, login):
    w = embedded.world
    r = run(login("olivia"), f"agent:{w.agent_a.pk}", weight_graph="0.5")
    assert r.status_code == 200, r.content.decode()[:2000]
    html = r.content.decode()
    event = RecallEvent.objects.latest("id")
    assert event.principal == f"agent:{w.agent_a.pk}"
    assert event.params["playground"]["run_by"] == f"user:{w.olivia.pk}"
    assert event.params["playground"]["username"] == "olivia"
    assert event.params["weights"] == {"graph": 0.5}
    assert f"Recall #{event.pk}" in html
    assert "Caroline lives in" in html
    assert '<svg class="chart"' in html and 'class="bar"' in html
    assert "Explain #" in html and "Why packed" in html and "Phase reached" in html
    assert "Timings (ms)" in html and "total" in html
    assert 'name="memory_id"' in html  # per-item feedback forms


def test_the_pack_respects_the_chosen_principals_visibility(embedded, login):
    w = embedded.world
    client = login("olivia")
    as_alice = run(client, f"user:{w.alice.pk}", "Bob salary note Zephyr roadmap")
    as_bob = run(client, f"user:{w.bob.pk}", "Bob salary note Zephyr roadmap")
    assert "Bob&#x27;s private salary note" not in as_alice.content.decode()
    assert "Team B roadmap" not in as_alice.content.decode()
    assert "Team B roadmap" in as_bob.content.decode()


def test_stored_markup_in_recalled_text_stays_inert(embedded, login):
    w = embedded.world
    html = run(login("olivia"), f"user:{w.alice.pk}", "window pwned script img").content
    assert b"&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html  # packed, escaped
    assert XSS.encode() not in html
    assert b"<script>window.__pwned" not in html


def test_htmx_run_returns_only_the_result_region(embedded, login):
    w = embedded.world
    r = login("olivia").post(
        URL,
        {"as_principal": f"user:{w.alice.pk}", "query": "Caroline"},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="result"') and "<nav" not in html


def test_bad_options_are_reported_and_nothing_runs(console, login):
    w = console.world
    r = run(
        login("olivia"),
        f"user:{w.alice.pk}",
        limit="0",
        sessions="a,b",
        window_boost="9",
    )
    assert r.status_code == 400
    assert "Check the request" in r.content.decode()
    assert (
        not RecallEvent.objects.exclude(pk__in=[console.event_alice.pk])
        .exclude(query="Caroline?")
        .exists()
    )


@pytest.mark.parametrize("target", ["carol", "agent_globex", "nobody"])
def test_a_principal_of_another_org_is_a_404(console, login, target):
    w = console.world
    value = {
        "carol": f"user:{w.carol.pk}",
        "agent_globex": f"agent:{w.agent_globex.pk}",
        "nobody": "user:999999",
    }[target]
    before = RecallEvent.objects.count()
    r = run(login("olivia"), value)
    assert r.status_code == 404
    assert RecallEvent.objects.count() == before


@pytest.mark.parametrize(
    ("persona", "status"),
    [("alice", 403), ("vera", 403), ("bob", 403), ("carol", 403), ("nora", 403)],
)
def test_only_org_admins_may_use_the_playground(console, login, persona, status):
    client = login(persona)
    w = console.world
    assert client.get(URL).status_code == status
    before = RecallEvent.objects.count()
    assert run(client, f"user:{w.alice.pk}").status_code == status
    assert RecallEvent.objects.count() == before
    r = client.post(
        reverse("ui:playground_feedback"),
        {"recall_id": console.event_alice.pk, "verdict": "helpful"},
    )
    assert r.status_code == status
    assert reverse("ui:playground") not in client.get("/memories/").content.decode()


def test_anonymous_is_sent_to_log_in(console, client):
    r = client.get(URL)
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_feedback_from_the_playground_lands_in_the_queue(embedded, login):
    w = embedded.world
    client = login("olivia")
    run(client, f"agent:{w.agent_a.pk}")
    event = RecallEvent.objects.latest("id")
    item = event.item_ids[0]
    r = client.post(
        reverse("ui:playground_feedback"),
        {
            "recall_id": event.pk,
            "memory_id": item,
            "verdict": "wrong",
            "comment": "<i>moved</i>",
        },
    )
    assert r.status_code == 302 and r["Location"].startswith("/feedback/")
    fb = Feedback.objects.get(event=event)
    assert (fb.memory_id, fb.verdict, fb.author) == (
        item,
        "wrong",
        f"user:{w.olivia.pk}",
    )
    queue = client.get(r["Location"]).content.decode()
    assert f"feedback-{fb.pk}" in queue and "&lt;i&gt;moved&lt;/i&gt;" in queue


def test_playground_feedback_errors_are_shown_not_stored(embedded, login):
    w = embedded.world
    client = login("olivia")
    run(client, f"user:{w.alice.pk}")
    event = RecallEvent.objects.latest("id")
    r = client.post(
        reverse("ui:playground_feedback"),
        {"recall_id": event.pk, "verdict": "missing"},
        follow=True,
    )
    assert "expected_memory_id" in r.content.decode()
    r = client.post(
        reverse("ui:playground_feedback"),
        {
            "recall_id": event.pk,
            "verdict": "missing",
            "expected_memory_id": embedded.globex_row.pk,
        },
        follow=True,
    )
    assert "not found" in r.content.decode()
    assert not Feedback.objects.filter(event=event).exists()


def test_feedback_on_another_orgs_recall_is_a_404(console, login):
    other = RecallEvent.objects.create(
        org=console.world.globex, principal="user:1", query="globex"
    )
    r = login("olivia").post(
        reverse("ui:playground_feedback"), {"recall_id": other.pk, "verdict": "helpful"}
    )
    assert r.status_code == 404


def test_a_corroborated_message_links_the_row_that_backed_it(embedded, login):
    w = embedded.world
    html = run(
        login("olivia"), f"user:{w.alice.pk}", "Caroline lives in Boston", mode="direct"
    ).content.decode()
    fact = embedded.fact_boston
    assert "corroborated ×" in html and "Corroborated by" in html
    assert (
        f'href="{reverse("ui:memory_detail", args=[fact.pk])}">#{fact.pk}</a>' in html
    )
