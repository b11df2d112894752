"""Console actions: resolving conflicts and reviewing feedback, with every refusal."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import Conflict, ConflictEvent, Memory
from recall.models import Feedback

pytestmark = pytest.mark.django_db


def resolve_url(c) -> str:
    return reverse("ui:conflict_action", args=[c.conflict.pk])


def review_url(feedback) -> str:
    return reverse("ui:feedback_review", args=[feedback.pk])


def test_conflict_queue_shows_alternatives_side_by_side_with_forms(console, login):
    html = login("alice").get(reverse("ui:conflict_list")).content.decode()
    assert "Caroline lives in Boston." in html and "Caroline lives in Denver." in html
    assert html.count('name="csrfmiddlewaretoken"') >= 3
    assert 'value="choose"' in html and 'value="both_valid"' in html
    assert "History (1)" in html


def test_member_chooses_an_alternative_and_history_records_it(console, login):
    c = console
    client = login("alice")
    r = client.post(
        resolve_url(c),
        {"action": "choose", "chosen": c.fact_boston.pk, "note": "she moved"},
    )
    assert r.status_code == 302
    conflict = Conflict.objects.get(pk=c.conflict.pk)
    assert conflict.status == "resolved" and conflict.chosen_id == c.fact_boston.pk
    assert Memory.objects.get(pk=c.fact_denver.pk).status == "superseded"
    assert ConflictEvent.objects.filter(conflict=conflict, action="choose").exists()
    html = client.get(reverse("ui:conflict_list"), {"status": "resolved"}).content
    assert b"she moved" in html and b"History (2)" in html
    assert b'title="open conflicts">0<' in html


def test_both_valid_with_bounds_and_dismiss(console, login):
    c = console
    client = login("olivia")
    r = client.post(
        resolve_url(c),
        {
            "action": "both_valid",
            f"from_{c.fact_denver.pk}": "2020-01-01",
            f"to_{c.fact_denver.pk}": "2023-04-30",
            "note": "moved in May",
        },
    )
    assert r.status_code == 302
    assert Conflict.objects.get(pk=c.conflict.pk).status == "resolved"
    denver = Memory.objects.get(pk=c.fact_denver.pk)
    assert denver.status == "superseded"
    assert Memory.objects.get(pk=denver.superseded_by_id).valid_to.year == 2023


def test_dismiss_needs_no_choice(console, login):
    r = login("alice").post(
        resolve_url(console), {"action": "dismiss", "note": "noise"}
    )
    assert r.status_code == 302
    assert Conflict.objects.get(pk=console.conflict.pk).status == "dismissed"


def test_invalid_resolution_is_reported_not_applied(console, login):
    client = login("alice")
    r = client.post(resolve_url(console), {"action": "choose"}, follow=True)
    assert b"Choose the alternative" in r.content
    r = client.post(
        resolve_url(console),
        {"action": "both_valid", f"from_{console.fact_boston.pk}": "garbage"},
        follow=True,
    )
    assert r.status_code == 200
    assert Conflict.objects.get(pk=console.conflict.pk).status == "open"


def test_viewer_cannot_resolve_and_sees_no_forms(console, login):
    client = login("vera")
    html = client.get(reverse("ui:conflict_list")).content.decode()
    assert "Caroline lives in Boston." in html and 'value="choose"' not in html
    r = client.post(resolve_url(console), {"action": "dismiss"})
    assert r.status_code == 403
    assert Conflict.objects.get(pk=console.conflict.pk).status == "open"


@pytest.mark.parametrize(("persona", "status"), [("carol", 404), ("nora", 403)])
def test_other_org_and_non_member_cannot_resolve(console, login, persona, status):
    r = login(persona).post(resolve_url(console), {"action": "dismiss"})
    assert r.status_code == status
    assert Conflict.objects.get(pk=console.conflict.pk).status == "open"


def test_resolution_needs_csrf(console, world):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    r = client.post(resolve_url(console), {"action": "dismiss"})
    assert r.status_code == 403
    assert Conflict.objects.get(pk=console.conflict.pk).status == "open"


# --- feedback ---------------------------------------------------------------------


def test_feedback_queue_lists_new_items_with_their_recall(console, login):
    html = login("alice").get(reverse("ui:feedback_list")).content.decode()
    assert "Where does Caroline live?" in html and "She moved to Boston" in html
    assert "Caroline lives in Denver." in html
    assert "Caroline?" not in html  # vera's recall is not alice's to see
    admin = login("olivia").get(reverse("ui:feedback_list")).content.decode()
    assert "Caroline?" in admin and 'title="new feedback">2<' in admin


def test_feedback_filters_by_verdict_and_status(console, login):
    client = login("olivia")
    html = client.get(reverse("ui:feedback_list"), {"verdict": "helpful"}).content
    assert b"Caroline?" in html and b"She moved to Boston" not in html
    html = client.get(reverse("ui:feedback_list"), {"status": "accepted"}).content
    assert b"No feedback here" in html


def test_accept_with_correction_supersedes_the_memory(console, login):
    c = console
    client = login("alice")
    r = client.post(
        review_url(c.feedback_wrong),
        {
            "decision": "accept",
            "action": "supersede",
            "correction": "Caroline lives in Boston since May.",
            "note": "checked",
        },
    )
    assert r.status_code == 302
    fb = Feedback.objects.get(pk=c.feedback_wrong.pk)
    assert fb.review_status == "accepted" and fb.review_note == "checked"
    old = Memory.objects.get(pk=c.fact_denver.pk)
    assert old.status == "superseded"
    assert old.superseded_by.content == "Caroline lives in Boston since May."
    assert fb.action["new_memory"] == old.superseded_by_id
    html = client.get(reverse("ui:memory_detail", args=[old.pk])).content.decode()
    assert "Caroline lives in Boston since May." in html


@pytest.mark.parametrize(
    ("action", "check"),
    [
        ("retract", lambda m: m.status == "retracted"),
        (
            "reinforce",
            lambda m: m.status == "active" and m.reinforcement["accepted"] == 1,
        ),
        (
            "outdated",
            lambda m: m.status == "superseded" and m.superseded_by.valid_to is not None,
        ),
        ("none", lambda m: m.status == "active"),
    ],
)
def test_accept_actions_change_memory(console, login, action, check):
    c = console
    r = login("olivia").post(
        review_url(c.feedback_wrong), {"decision": "accept", "action": action}
    )
    assert r.status_code == 302
    assert check(Memory.objects.get(pk=c.fact_denver.pk))


def test_reject_keeps_memory_and_records_note(console, login):
    c = console
    login("alice").post(
        review_url(c.feedback_wrong), {"decision": "reject", "note": "no"}
    )
    fb = Feedback.objects.get(pk=c.feedback_wrong.pk)
    assert fb.review_status == "rejected" and fb.review_note == "no"
    assert Memory.objects.get(pk=c.fact_denver.pk).status == "active"


def test_supersede_without_text_and_double_review_are_refused(console, login):
    client = login("alice")
    url = review_url(console.feedback_wrong)
    r = client.post(url, {"decision": "accept", "action": "supersede"}, follow=True)
    assert b"needs the corrected text" in r.content
    client.post(url, {"decision": "reject"})
    r = client.post(url, {"decision": "accept", "action": "retract"}, follow=True)
    assert b"already rejected" in r.content
    assert Memory.objects.get(pk=console.fact_denver.pk).status == "active"


def test_viewer_cannot_accept_even_their_own_feedback(console, login):
    client = login("vera")
    html = client.get(reverse("ui:feedback_list")).content.decode()
    assert "Caroline?" in html and 'value="accept"' not in html
    r = client.post(
        review_url(console.feedback_vera), {"decision": "accept", "action": "retract"}
    )
    assert r.status_code == 403
    assert Feedback.objects.get(pk=console.feedback_vera.pk).review_status == "new"
    assert Memory.objects.get(pk=console.fact_boston.pk).status == "active"


@pytest.mark.parametrize(
    ("persona", "status"), [("carol", 404), ("nora", 403), ("bob", 404)]
)
def test_others_cannot_review_feedback(console, login, persona, status):
    r = login(persona).post(
        review_url(console.feedback_wrong), {"decision": "accept", "action": "retract"}
    )
    assert r.status_code == status
    assert Memory.objects.get(pk=console.fact_denver.pk).status == "active"
