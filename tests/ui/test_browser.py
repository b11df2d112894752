"""Real Chromium through Playwright: log in, browse and filter, open a detail, resolve a
conflict, accept feedback and see the memory change. No console errors (CSP violations
included); screenshots of every page go to docs/screenshots/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from memory.models import Conflict, Memory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"


@pytest.fixture
def errors(page: Page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(str(e)))
    return seen


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def log_in(page: Page, base: str, user: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(f"pw-{user}")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Memories")).to_be_visible()


def test_operator_walkthrough(console, live_server, page: Page, errors):
    base = live_server.url
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/accounts/login/")
    shot(page, "login")
    log_in(page, base, "olivia")
    shot(page, "memory-explorer")

    # Full-text search swaps the results in place and updates the URL.
    page.get_by_label("Search").fill("harbour")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#results")).to_contain_text("best matches first")
    expect(page.locator("#results")).to_contain_text("harbour is lovely")
    expect(page.locator("#results")).not_to_contain_text("Caroline lives in Denver.")
    expect(page).to_have_url(re.compile(r"q=harbour"))
    page.get_by_label("Search").fill("")
    page.get_by_label("Tier").select_option("semantic")
    expect(page.locator("#results")).to_contain_text("Caroline lives in Denver.")
    expect(page.locator("#results")).not_to_contain_text("harbour")
    expect(page).to_have_url(re.compile(r"tier=semantic"))
    shot(page, "memory-explorer-filtered")

    page.get_by_role("link", name="Caroline lives in Boston.").click()
    expect(page.get_by_role("heading", name=re.compile(r"Memory #"))).to_be_visible()
    expect(page.get_by_text("harbour is lovely")).to_be_visible()  # citation
    shot(page, "memory-detail")

    page.get_by_role("link", name="Caroline", exact=True).first.click()
    expect(page.locator("svg.graph")).to_be_visible()
    shot(page, "entity")

    page.goto(f"{base}/sessions/")
    shot(page, "sessions")
    page.get_by_role("link", name="run-1").click()
    expect(page.locator("#timeline")).to_contain_text("pending")
    shot(page, "session-timeline")

    # The stored payloads never ran.
    assert page.evaluate("window.__pwned") is None

    page.goto(f"{base}/feedback/")
    shot(page, "feedback")
    item = page.locator(f"#feedback-{console.feedback_wrong.pk}")
    item.get_by_label("Action on accept").select_option("supersede")
    item.get_by_label("Correction (for supersede)").fill("Caroline moved to Boston.")
    item.get_by_role("button", name="Accept").click()
    expect(page.get_by_role("status")).to_contain_text("accepted")
    new_id = Memory.objects.get(pk=console.fact_denver.pk).superseded_by_id
    assert new_id is not None

    page.goto(f"{base}/memories/{console.fact_denver.pk}/")
    expect(page.get_by_text("Supersession history")).to_be_visible()
    expect(page.get_by_text("Caroline moved to Boston.").first).to_be_visible()

    page.goto(f"{base}/conflicts/")
    shot(page, "conflicts")
    case = page.locator(f"#conflict-{console.conflict.pk}")
    case.get_by_label(re.compile(rf"#{console.fact_boston.pk}:")).check()
    case.locator("textarea[name=note]").first.fill("She moved in May")
    case.get_by_role("button", name="Resolve").click()
    expect(page.get_by_role("status")).to_contain_text("choose one recorded")
    assert Conflict.objects.get(pk=console.conflict.pk).status == "resolved"

    assert errors == []


def test_explorer_is_usable_on_a_phone(console, live_server, page: Page, errors):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server.url, "alice")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    page.keyboard.press("Tab")  # skip link is the first stop
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    shot(page, "memory-explorer-390")
    page.goto(f"{live_server.url}/conflicts/")
    shot(page, "conflicts-390")
    assert errors == []


def test_playground_feedback_then_review_changes_the_memory(
    console, live_server, page: Page, errors
):
    from memory.services import memory_embed
    from recall.models import Feedback

    memory_embed(ids=list(Memory.objects.values_list("id", flat=True)))
    base = live_server.url
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, base, "olivia")
    page.get_by_role("link", name="Playground").click()
    expect(page.get_by_role("heading", name="Recall playground")).to_be_visible()
    page.get_by_label("Run as").select_option(f"agent:{console.world.agent_a.pk}")
    page.get_by_label("Query").fill("Where does Caroline live?")
    page.get_by_role("button", name="Run recall").click()
    expect(page.locator("#result")).to_contain_text("Recall #")
    expect(page.locator("#result svg.chart rect.bar").first).to_be_visible()
    denver = console.fact_denver.pk
    item = page.locator(f"#item-{denver}")
    expect(item).to_contain_text("Caroline lives in Denver.")
    expect(item.locator("table")).to_contain_text("lexical")
    shot(page, "playground")

    item.get_by_label(f"Verdict on #{denver}").select_option("wrong")
    item.get_by_label(f"Comment on #{denver}").fill("She moved to Boston in May")
    item.get_by_role("button", name=f"Send feedback on #{denver}").click()
    expect(page.get_by_role("status")).to_contain_text("recorded")
    fb = Feedback.objects.latest("id")
    assert (fb.memory_id, fb.verdict, fb.author) == (
        denver,
        "wrong",
        f"user:{console.world.olivia.pk}",
    )

    queued = page.locator(f"#feedback-{fb.pk}")
    expect(queued).to_contain_text("She moved to Boston in May")
    queued.get_by_label("Action on accept").select_option("supersede")
    queued.get_by_label("Correction (for supersede)").fill("Caroline lives in Boston.")
    queued.get_by_label("Note").fill("checked with Mel")
    queued.get_by_role("button", name="Accept").click()
    expect(page.get_by_role("status")).to_contain_text("accepted")
    assert Memory.objects.get(pk=denver).status == "superseded"

    page.goto(f"{base}/memories/{denver}/")
    expect(page.get_by_text("Supersession history")).to_be_visible()
    expect(page.locator(".badge.superseded").first).to_be_visible()
    assert errors == []
