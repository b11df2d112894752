"""Every console page renders for a member, shows only what ``visible_to`` allows and
refuses other orgs, non-members and anonymous visitors."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memory.models import EmbeddingState, Memory
from tests.ui.conftest import XSS, Console

pytestmark = pytest.mark.django_db


def page_urls(c: Console) -> list[str]:
    return [
        reverse("ui:memory_list"),
        reverse("ui:memory_detail", args=[c.fact_boston.pk]),
        reverse("ui:session_list"),
        reverse("ui:session_detail", args=[c.session.pk]),
        reverse("ui:entity_list"),
        reverse("ui:entity_detail", args=[c.caroline.pk]),
        reverse("ui:conflict_list"),
        reverse("ui:feedback_list"),
    ]


def test_every_page_renders_for_a_member_with_nav_counts(console, login):
    client = login("alice")
    for url in page_urls(console):
        r = client.get(url)
        assert r.status_code == 200, url
        html = r.content.decode()
        assert 'title="open conflicts">1<' in html, url
        assert 'title="new feedback">1<' in html, url  # alice sees her own recall only


def test_anonymous_visitors_are_sent_to_login(console, client):
    for url in page_urls(console):
        r = client.get(url)
        assert r.status_code == 302 and r.url.startswith("/accounts/login/"), url


def test_login_page_renders_and_logs_in(world, client):
    r = client.get("/accounts/login/")
    assert r.status_code == 200 and b'name="csrfmiddlewaretoken"' in r.content
    r = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert r.status_code == 302
    assert client.get(r.url, follow=True).status_code == 200


def test_user_without_membership_gets_403_everywhere(console, login):
    client = login("nora")
    for url in page_urls(console):
        assert client.get(url).status_code == 403, url


def test_other_org_sees_none_of_acme(console, login):
    client = login("carol")
    c = console
    for url in page_urls(c)[1:]:
        if url.endswith(("/memories/", "/sessions/", "/entities/")):
            continue
    for url in [
        reverse("ui:memory_detail", args=[c.fact_boston.pk]),
        reverse("ui:session_detail", args=[c.session.pk]),
        reverse("ui:entity_detail", args=[c.caroline.pk]),
    ]:
        assert client.get(url).status_code == 404, url
    html = client.get(reverse("ui:memory_list")).content.decode()
    assert "Globex merger codename" in html and "Caroline" not in html
    assert "run-1" not in client.get(reverse("ui:session_list")).content.decode()
    assert (
        "No conflicts here" in client.get(reverse("ui:conflict_list")).content.decode()
    )
    assert (
        "No feedback here" in client.get(reverse("ui:feedback_list")).content.decode()
    )


def test_missing_and_hidden_memories_give_the_same_404(console, login):
    client = login("alice")
    hidden = client.get(reverse("ui:memory_detail", args=[console.private_bob.pk]))
    missing = client.get(reverse("ui:memory_detail", args=[999_999]))
    assert hidden.status_code == missing.status_code == 404
    token = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')
    assert token.sub(b"", hidden.content) == token.sub(b"", missing.content)


def test_explorer_hides_private_and_other_team_rows(console, login):
    html = login("alice").get(reverse("ui:memory_list")).content.decode()
    assert "Caroline lives in Boston." in html
    assert "salary" not in html and "Zephyr" not in html
    bob_html = login("bob").get(reverse("ui:memory_list")).content.decode()
    assert "salary" in bob_html and "Zephyr" in bob_html


@pytest.mark.parametrize(
    ("params", "present", "absent"),
    [
        ({"tier": "semantic"}, ["Caroline lives in Boston."], ["harbour"]),
        ({"kind": "message"}, ["harbour"], ["Caroline lives in Denver."]),
        ({"q": "harbour lovely"}, ["harbour"], ["Caroline lives in Denver."]),
        ({"q": '"lives in Denver"'}, ["Caroline lives in Denver."], ["Boston."]),
        ({"q": "boston -harbour"}, ["Caroline lives in Boston."], ["harbour is"]),
        ({"session": "run-1", "q": "flat"}, ["Denver?"], ["Caroline lives in"]),
        ({"entity": "Boston"}, ["harbour", "lives in Boston"], ["lives in Denver"]),
        ({"status": "retracted"}, ["0 memories"], ["harbour"]),
        ({"visibility": "org", "since": "2000-01-01"}, ["harbour"], []),
        ({"until": "2000-01-01"}, ["0 memories"], ["harbour"]),
    ],
)
def test_explorer_filters(console, login, params, present, absent):
    html = login("alice").get(reverse("ui:memory_list"), params).content.decode()
    for text in present:
        assert text in html, (params, text)
    for text in absent:
        assert text not in html, (params, text)


def test_explorer_filter_by_entity_id_and_bad_input_is_harmless(console, login):
    client = login("alice")
    html = client.get(
        reverse("ui:memory_list"), {"entity": console.caroline.pk}
    ).content.decode()
    assert "harbour" in html
    r = client.get(reverse("ui:memory_list"), {"since": "not-a-date", "page": "x"})
    assert r.status_code == 200


def test_explorer_htmx_request_gets_only_the_results_region(console, login):
    r = login("alice").get(
        reverse("ui:memory_list"), {"tier": "semantic"}, HTTP_HX_REQUEST="true"
    )
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="results"')
    assert "<nav" not in html.split('class="pagination"')[0]
    assert "Caroline lives in Boston." in html


def test_explorer_paginates_and_keeps_filters_in_links(console, login, world):
    from memory.services import MemoryInput, memory_remember

    memory_remember(
        principal=world.principal("alice"),
        items=[MemoryInput(content=f"note number {i}") for i in range(30)],
        enqueue=False,
    )
    client = login("alice")
    html = client.get(reverse("ui:memory_list"), {"kind": "message"}).content.decode()
    assert "Page 1 of 2" in html
    assert 'href="?kind=message&amp;page=2"' in html
    assert 'hx-get="?kind=message&amp;page=2"' in html
    page2 = client.get(reverse("ui:memory_list"), {"kind": "message", "page": 2})
    assert "Page 2 of 2" in page2.content.decode()


def test_stored_script_and_javascript_links_stay_inert(console, login):
    client = login("alice")
    for url in [
        reverse("ui:memory_list"),
        reverse("ui:memory_detail", args=[console.xss.pk]),
        reverse("ui:session_detail", args=[console.session.pk]),
    ]:
        html = client.get(url).content.decode()
        assert "<script>window.__pwned" not in html, url
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html, url
        assert "<img src=x" not in html, url
        assert 'href="javascript:' not in html, url
        # The only scripts are the vendored htmx file(s).
        assert all("/static/" in s for s in re.findall(r"<script[^>]*>", html)), url
    assert XSS not in client.get(reverse("ui:memory_list")).content.decode()


def test_pages_carry_a_csp_without_inline_scripts(console, login):
    r = login("alice").get(reverse("ui:memory_list"))
    csp = r["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    html = r.content.decode()
    assert not re.search(r"<[^>]*\son[a-z]+=", html), "inline event handler"
    assert "style=" not in html
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert "/api/" not in r["Content-Security-Policy"]


def test_every_form_field_has_a_label(console, login):
    client = login("olivia")
    for url in page_urls(console):
        html = client.get(url).content.decode()
        ids = re.findall(r'<(?:input|select|textarea)[^>]*\sid="([^"]+)"', html)
        for control_id in ids:
            assert f'for="{control_id}"' in html, (url, control_id)
        for tag in re.findall(r"<form[^>]*method=\"post\"[^>]*>", html):
            assert tag  # each post form is followed by a token:
        assert html.count('method="post"') <= html.count("csrfmiddlewaretoken"), url


def test_memory_detail_shows_lineage_entities_relationships_conflicts(console, login):
    c = console
    html = (
        login("alice")
        .get(reverse("ui:memory_detail", args=[c.fact_boston.pk]))
        .content.decode()
    )
    assert f"#{c.messages[0].pk}" in html  # derived from / citation
    assert "harbour" in html
    assert "lives_in" in html and "Fact conflict #" in html
    assert reverse("ui:entity_detail", args=[c.caroline.pk]) in html
    src = (
        login("alice")
        .get(reverse("ui:memory_detail", args=[c.messages[0].pk]))
        .content.decode()
    )
    assert "Derivations (1)" in src and "Caroline lives in Boston." in src


def test_memory_detail_shows_supersession_history(console, login, world):
    from memory.services import MemoryInput, memory_supersede

    new = memory_supersede(
        principal=world.principal("alice"),
        memory_id=console.fact_denver.pk,
        correction=MemoryInput(
            content="Caroline lived in Denver until May.", tier="semantic", kind="fact"
        ),
    )
    client = login("alice")
    old_html = client.get(
        reverse("ui:memory_detail", args=[console.fact_denver.pk])
    ).content.decode()
    assert "Supersession history" in old_html and f"#{new.pk}" in old_html
    new_html = client.get(reverse("ui:memory_detail", args=[new.pk])).content.decode()
    assert f"#{console.fact_denver.pk}" in new_html and "older" in new_html


def test_session_timeline_polls_only_while_embedding_is_pending(console, login):
    client = login("alice")
    url = reverse("ui:session_detail", args=[console.session.pk])
    html = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in html and "5 pending" in html
    assert html.index("harbour") < html.index(
        "Caroline lives in Boston."
    )  # derived row
    Memory.objects.filter(session=console.session).update(
        embedding_state=EmbeddingState.READY
    )
    Memory.objects.filter(pk=console.fact_boston.pk).update(
        embedding_state=EmbeddingState.READY
    )
    part = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<section id="timeline"')
    assert "every 2s" not in part and "pending" not in part


def test_session_list_counts_pending_rows_and_filters(console, login):
    client = login("alice")
    html = client.get(reverse("ui:session_list")).content.decode()
    assert "run-1" in html and "4 pending" in html
    html = client.get(reverse("ui:session_list"), {"q": "nope"}).content.decode()
    assert "0 sessions" in html


def test_entity_page_draws_an_svg_graph_and_lists_facts(console, login):
    html = (
        login("alice")
        .get(reverse("ui:entity_detail", args=[console.caroline.pk]))
        .content.decode()
    )
    assert "<svg" in html and "<line" in html and "lives_in" in html
    assert "Boston" in html and "Caroline lives in Boston." in html
    entities_html = login("alice").get(reverse("ui:entity_list"), {"q": "carol"})
    assert "Caroline" in entities_html.content.decode()


def test_entity_only_mentioned_in_hidden_rows_is_not_found(console, login, world):
    from memory.models import Entity

    zephyr = Entity.objects.get(org=world.acme, normalized_name="zephyr")
    assert (
        login("bob").get(reverse("ui:entity_detail", args=[zephyr.pk])).status_code
        == 200
    )
    assert (
        login("alice").get(reverse("ui:entity_detail", args=[zephyr.pk])).status_code
        == 404
    )
    assert (
        "Zephyr" not in login("alice").get(reverse("ui:entity_list")).content.decode()
    )


def test_org_switcher_changes_the_active_org(console, login, world):
    from accounts.models import Membership, Role

    Membership.objects.create(user=world.alice, org=world.globex, role=Role.MEMBER)
    client = login("alice")
    html = client.get(reverse("ui:memory_list")).content.decode()
    assert 'name="org"' in html and "Caroline" in html
    r = client.post(
        reverse("ui:switch_org"), {"org": world.globex.pk, "next": "/memories/"}
    )
    assert r.status_code == 302 and r.url == "/memories/"
    html = client.get(reverse("ui:memory_list")).content.decode()
    assert "Globex merger codename" in html and "Caroline lives" not in html


def test_org_switcher_refuses_an_org_you_are_not_in(console, login, world):
    client = login("alice")
    client.post(reverse("ui:switch_org"), {"org": world.globex.pk})
    html = client.get(reverse("ui:memory_list")).content.decode()
    assert "Caroline lives in Boston." in html and "Globex" not in html
