"""Entity resolution (trigram + embedding), reversible merges, and the drift flag."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory import resolution
from memory.conflicts import refresh_drift
from memory.entities import entities_for_names
from memory.models import Conflict, Entity, EntityMerge, Mention, Relationship
from memory.services import Forbidden

MAY = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


def _entities(world, *names):
    found = entities_for_names(world.acme.pk, [(n, "thing") for n in names])
    return [found[n.lower()] for n in names]


def test_near_duplicate_names_merge_and_different_ones_do_not(world):
    a, b, c, d, e, f, g, h = _entities(
        world,
        "Louvre Museum",
        "Lovre Museum",
        "Team A",
        "Team B",
        "May 2022",
        "May 2023",
        "pottery class",
        "pottery classes",
    )
    Entity.objects.filter(pk__in=[a.pk, h.pk]).update(mention_count=5)
    merges = resolution.entities_resolve(world.acme.pk, [a.pk, c.pk, e.pk, g.pk])
    assert len(merges) == 2
    reasons = {(m.source_id, m.target_id): m.reason for m in EntityMerge.objects.all()}
    assert reasons == {(b.pk, a.pk): "one_typo", (g.pk, h.pk): "trigram+embedding"}
    assert Entity.objects.get(pk=a.pk).aliases == ["lovre museum"]
    assert not Entity.objects.filter(
        pk__in=[c.pk, d.pk, e.pk, f.pk], merged_into__isnull=False
    ).exists()
    # The alias now resolves to the surviving entity instead of a new one.
    again = entities_for_names(world.acme.pk, [("Lovre Museum", "place")])
    assert again["lovre museum"].pk == a.pk


def test_a_merge_moves_mentions_and_relationships_and_undo_restores_them(writer, world):
    session = writer.session("alice", "m")
    writer.say(
        "alice",
        session,
        ("Melanie", "Carolyn lives in Boston.", MAY),
        ("Melanie", "Caroline loves pottery.", MAY),
    )
    writer.consolidate(session)
    carolyn = Entity.objects.get(normalized_name="carolyn")
    caroline = Entity.objects.get(normalized_name="caroline")
    rel = Relationship.objects.get(predicate="lives_in")
    assert rel.subject_id == carolyn.pk
    with pytest.raises(Forbidden):
        resolution.entity_merge(
            source_id=carolyn.pk,
            target_id=caroline.pk,
            actor="user:alice",
            principal=world.principal("alice"),
        )
    mentions_before = set(
        Mention.objects.filter(entity=carolyn).values_list("id", flat=True)
    )
    merge = resolution.entity_merge(
        source_id=carolyn.pk,
        target_id=caroline.pk,
        actor="user:olivia",
        principal=world.principal("olivia"),
    )
    rel.refresh_from_db()
    assert rel.subject_id == caroline.pk
    assert not Mention.objects.filter(entity=carolyn).exists()
    resolution.entity_unmerge(
        merge_id=merge.pk, actor="user:olivia", principal=world.principal("olivia")
    )
    rel.refresh_from_db()
    carolyn.refresh_from_db()
    caroline.refresh_from_db()
    assert rel.subject_id == carolyn.pk and carolyn.merged_into_id is None
    assert "carolyn" not in caroline.aliases
    assert set(Mention.objects.filter(entity=carolyn).values_list("id", flat=True)) == (
        mentions_before
    )
    assert EntityMerge.objects.get().undone_by == "user:olivia"


def test_another_org_cannot_merge_entities(world):
    (a, b) = _entities(world, "Acme Widget", "Acme Widgets")
    from memory.services import NotFound

    with pytest.raises(NotFound):
        resolution.entity_merge(
            source_id=a.pk,
            target_id=b.pk,
            actor="x",
            principal=world.principal("carol"),
        )


def test_drift_flag_follows_open_conflicts_and_expires_after_the_window(
    writer, world, settings
):
    s = writer.session("alice", "d")
    writer.say(
        "alice",
        s,
        ("Caroline", "I live in Boston.", MAY),
        ("Melanie", "Caroline lives in Denver.", MAY + timedelta(hours=1)),
    )
    writer.consolidate(s)
    caroline = Entity.objects.get(normalized_name="caroline")
    melanie = Entity.objects.get(normalized_name="melanie")
    assert caroline.unstable and caroline.unstable_since is not None
    assert not melanie.unstable
    conflict = Conflict.objects.get()
    conflict.status = "dismissed"
    conflict.resolved_at = datetime.now(UTC) - timedelta(days=40)
    conflict.save()
    settings.MNEMO_DRIFT_WINDOW_DAYS = 30
    refresh_drift([caroline.pk])
    caroline.refresh_from_db()
    assert not caroline.unstable
