"""Citations: the raw rows a packed item traces to, through derived_from."""

from __future__ import annotations

import pytest

from memory import services
from memory.services import MemoryInput
from recall.channels import read_rows
from recall.citations import citations_for

pytestmark = pytest.mark.django_db


def remember(principal, *items):
    return services.memory_remember(
        principal=principal, items=list(items), enqueue=False
    ).memories


def _derived(principal, content, tier, kind, *sources):
    return remember(
        principal,
        MemoryInput(
            content=content,
            tier=tier,
            kind=kind,
            derived_from=tuple(s.pk for s in sources),
        ),
    )[0]


@pytest.mark.parametrize("generic_plans", [True, False])
def test_citations_follow_lineage_up_to_four_hops(world, settings, generic_plans):
    settings.MNEMO_RECALL_GENERIC_PLANS = generic_plans
    alice = world.principal("alice")
    t1, t2 = remember(
        alice, MemoryInput(content="turn one"), MemoryInput(content="turn two")
    )
    episode = _derived(alice, "the two turns", "episodic", "observation", t1, t2)
    fact = _derived(alice, "a fact of them", "semantic", "fact", episode)
    # A chain: c4 -> c3 -> c2 -> c1 -> c0 (raw) is four hops; c5 is five.
    chain = [remember(alice, MemoryInput(content="the chain's root"))[0]]
    for n in range(1, 5):
        chain.append(_derived(alice, f"link {n}", "episodic", "observation", chain[-1]))
    chain.append(_derived(alice, "too far", "semantic", "fact", chain[-1]))
    ids = [fact.pk, episode.pk, t1.pk, chain[4].pk, chain[5].pk]
    rows = read_rows(alice, ids)
    cites, totals = citations_for(alice, ids, rows)
    assert {c["id"] for c in cites[fact.pk]} == {t1.pk, t2.pk}
    assert {c["id"] for c in cites[episode.pk]} == {t1.pk, t2.pk}
    assert [c["id"] for c in cites[t1.pk]] == [t1.pk]
    assert [c["id"] for c in cites[chain[4].pk]] == [chain[0].pk]
    assert cites[chain[5].pk] == [] and totals[chain[5].pk] == 0
    assert totals[fact.pk] == 2
    # Most relevant first: a turn this recall ranked leads.
    cites, _ = citations_for(alice, [fact.pk], rows, scores={t2.pk: 1.0})
    assert [c["id"] for c in cites[fact.pk]] == [t2.pk, t1.pk]


def test_another_orgs_principal_is_cited_nothing_it_cannot_see(world):
    """The walk runs under the caller's row-level security scope and raw rows are
    read through its visibility: another org's lineage yields no citation."""
    alice, carol = world.principal("alice"), world.principal("carol")
    turn = remember(alice, MemoryInput(content="acme's turn"))[0]
    fact = _derived(alice, "acme's fact", "semantic", "fact", turn)
    rows = read_rows(alice, [fact.pk])
    # carol is handed alice's row (as if a caller leaked it): still no evidence.
    cites, totals = citations_for(carol, [fact.pk], rows)
    assert cites[fact.pk] == [] and totals[fact.pk] == 0
