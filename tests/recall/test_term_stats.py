"""Counted term frequencies: what refresh counts; the lexical channel reading them."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from accounts import rls
from memory import services
from memory.models import Memory
from memory.services import MemoryInput
from recall import channels, term_stats
from recall.models import TermFrequency, TermStats
from recall.scope import Scope

pytestmark = pytest.mark.django_db


def remember(principal, *items):
    return services.memory_remember(
        principal=principal, items=list(items), enqueue=False
    ).memories


def _corpus(world):
    """Acme: 39 'project status' rows, one zeppelin row, a private row of team B's;
    Globex: a row full of words Acme also uses."""
    alice, bob = world.principal("alice"), world.principal("bob")
    rows = remember(
        alice,
        *[
            MemoryInput(content=f"project status update number {i}", visibility="org")
            for i in range(39)
        ],
        MemoryInput(content="the zeppelin project is grounded", visibility="org"),
    )
    secret = remember(
        bob, MemoryInput(content="zeppelin budget is secret", visibility="private")
    )[0]
    remember(
        world.principal("carol"),
        MemoryInput(content="zeppelin zeppelin project status", visibility="org"),
    )
    return rows, secret


def _clear_caches():
    channels._df_cache.clear()
    channels._population_cache.clear()


def test_refresh_counts_active_rows_per_org_and_tier(world):
    rows, secret = _corpus(world)
    Memory.objects.filter(pk=rows[0].pk).update(status="superseded")
    done = term_stats.refresh(min_rows=10)
    assert set(done) == {world.acme.pk}  # Globex holds one row: under min_rows
    stats = TermStats.objects.get(org=world.acme)
    assert stats.tier_rows == {"raw": 40}  # 41 rows, one superseded
    df = dict(
        TermFrequency.objects.filter(org=world.acme, tier="raw").values_list(
            "term", "df"
        )
    )
    assert df["project"] == 39 and df["zeppelin"] == 2  # bob's private row counts
    got = term_stats.lookup(world.acme.pk, ["raw"], ["zeppelin", "the", "nowhere"])
    assert got is not None
    assert (
        got.df == {"zeppelin": 2, "nowhere": 0} and got.rows == 40
    )  # "the": stop word
    assert term_stats.lookup(world.acme.pk, ["semantic"], ["zeppelin"]).df == {
        "zeppelin": 0
    }
    assert term_stats.lookup(world.globex.pk, ["raw"], ["zeppelin"]) is None
    # Recounted from scratch; an org that fell under the threshold loses its counts.
    assert term_stats.refresh(min_rows=100) == {}
    assert not TermStats.objects.exists() and not TermFrequency.objects.exists()


def test_the_lexical_channel_over_the_cap_ranks_the_same_with_counted_stats(world):
    rows, secret = _corpus(world)
    zeppelin = rows[-1]
    alice = world.principal("alice")
    scope = Scope(principal=alice, tiers=("raw",))
    _clear_caches()
    counted = channels.lexical_channel(
        scope, ["zeppelin", "project"], k=50, candidate_cap=10
    )
    term_stats.refresh(min_rows=10)
    _clear_caches()
    probe, exact, floors = channels.probe_terms(
        scope, ["zeppelin", "project"], 40, candidate_cap=10
    )
    # zeppelin's two rows fit among 10 candidates: its df is left to the candidate
    # query (which counts only what alice may see); project is common (40 * 5% = 2).
    assert probe == ["zeppelin"] and exact == [None, None]
    assert floors[0] is None and floors[1] >= 3.0
    with_stats = channels.lexical_channel(
        scope, ["zeppelin", "project"], k=50, candidate_cap=10
    )
    assert [h.memory_id for h in with_stats] == [zeppelin.pk]
    assert [h.memory_id for h in counted] == [zeppelin.pk]
    assert with_stats[0].score == pytest.approx(counted[0].score)
    # Bob's private row is counted in the org's statistics but never returned.
    assert secret.pk not in {
        h.memory_id
        for h in channels.lexical_channel(
            scope, ["zeppelin", "budget"], k=50, candidate_cap=10
        )
    }
    # Rare terms whose rows do not fit among the candidates get the counted estimate.
    _, exact, _ = channels.probe_terms(scope, ["zeppelin"], 40, candidate_cap=1)
    assert exact == [pytest.approx(2 * 40 / 41)]


def test_every_term_common_probes_the_least_common_and_new_terms_probe_too(world):
    _corpus(world)
    term_stats.refresh(min_rows=10)
    scope = Scope(principal=world.principal("alice"), tiers=("raw",))
    probe, _, _ = channels.probe_terms(scope, ["project", "status"], 40)
    assert probe == ["status"]  # in 39 rows, project in 40
    probe, _, _ = channels.probe_terms(scope, ["project", "brandnew"], 40)
    assert probe == ["brandnew", "project"]


def test_another_org_cannot_read_an_org_s_term_statistics(world):
    _corpus(world)
    term_stats.refresh(min_rows=1)
    with transaction.atomic():
        rls.apply_scope(rls.ORG, [world.globex.pk])
        assert set(TermFrequency.objects.values_list("org_id", flat=True)) == {
            world.globex.pk
        }
        assert term_stats.lookup(world.acme.pk, ["raw"], ["zeppelin"]) is None


def test_the_command_counts_named_or_large_orgs_and_rejects_bad_input(world):
    _corpus(world)
    out = StringIO()
    call_command("term_stats", "--min-rows", "10", stdout=out)
    assert f"org {world.acme.pk}: counted" in out.getvalue()
    out = StringIO()
    call_command("term_stats", "--org", str(world.globex.pk), stdout=out)
    assert f"org {world.globex.pk}: counted" in out.getvalue()
    with pytest.raises(CommandError, match="at least 1"):
        call_command("term_stats", "--min-rows", "0")
    with pytest.raises(CommandError, match="no such org"):
        call_command("term_stats", "--org", "999999")
