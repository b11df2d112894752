"""Consolidation end to end on real PostgreSQL with the real embedding model."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.consolidation.topics import topic_covers
from memory.models import Memory, Relationship, Status
from tests.knowledge.conftest import derived

MAY8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
MAY8_LATER = datetime(2023, 5, 8, 14, 5, tzinfo=UTC)


def _chat(writer, persona="alice", visibility=None):
    session = writer.session(persona, "locomo-1")
    msgs = writer.say(
        persona,
        session,
        ("Caroline", "Hey Mel! Good to see you! How have you been?", MAY8),
        (
            "Caroline",
            "I went to a LGBTQ support group yesterday and it was so powerful.",
            MAY8,
        ),
        ("Melanie", "Wow, that's cool, Caroline! What happened?", MAY8),
        (
            "Melanie",
            "I painted that lake sunrise last year! I live in Boston with my kids.",
            MAY8_LATER,
        ),
        ("Caroline", "Always check the trail map before you start a hike.", MAY8_LATER),
        visibility=visibility,
    )
    return session, msgs


def test_observations_are_attributed_dated_and_traced_to_a_quote(writer, world):
    session, msgs = _chat(writer)
    writer.consolidate(session)
    obs = derived("observation", session=session)
    texts = [o.content for o in obs]
    assert (
        "Caroline went to a LGBTQ support group yesterday (7 May 2023) and it was "
        "so powerful." in texts
    )
    support = next(o for o in obs if "support group" in o.content)
    assert support.occurred_at.date().isoformat() == "2023-05-07"
    assert list(support.derived_from.values_list("id", flat=True)) == [msgs[1].pk]
    span = support.source_span
    assert msgs[1].content[span["start"] : span["end"]] == span["quote"]
    assert span["memory_id"] == msgs[1].pk
    # greetings and questions are not observations
    assert not any("Good to see you" in t or "What happened" in t for t in texts)
    assert any(
        t.startswith("Melanie painted that lake sunrise last year (2022)")
        for t in texts
    )


def test_fact_lineage_runs_fact_to_observation_to_message_span(writer, world):
    session, msgs = _chat(writer)
    writer.consolidate(session)
    fact = next(f for f in derived("fact") if f.content.startswith("Melanie lives in"))
    assert fact.content == "Melanie lives in Boston"
    (obs,) = fact.derived_from.all()
    assert obs.kind == "observation"
    (message,) = obs.derived_from.all()
    assert message.pk == msgs[3].pk
    quote = fact.source_span["quote"]
    assert quote in message.content and "Boston" in quote
    rel = Relationship.objects.get(statement=fact)
    assert rel.subject.name == "Melanie" and rel.predicate == "lives_in"
    assert rel.object_entity.name == "Boston" and rel.object_entity.type == "place"
    assert set(rel.evidence.values_list("id", flat=True)) >= {
        fact.pk,
        obs.pk,
        message.pk,
    }


def test_procedures_episode_and_rerun_is_idempotent(writer, world):
    session, _ = _chat(writer)
    writer.consolidate(session)
    (rule,) = derived("rule")
    assert rule.content == "Always check the trail map before you start a hike."
    (episode,) = derived("episode", session=session)
    assert "Conversation between Caroline and Melanie on 8 May 2023" in episode.content
    assert "Highlights:" in episode.content
    assert episode.metadata["participants"] == ["Caroline", "Melanie"]
    before = Memory.objects.count()
    writer.consolidate(session)
    writer.consolidate(session, full=True)
    assert Memory.objects.count() == before


def test_new_messages_extend_the_episode_and_supersede_the_old_digest(writer, world):
    session, _ = _chat(writer)
    writer.consolidate(session)
    (old,) = derived("episode", session=session)
    writer.say(
        "alice", session, ("Caroline", "I adopted a puppy named Max today.", MAY8_LATER)
    )
    writer.consolidate(session)
    episodes = derived("episode", session=session)
    assert len(episodes) == 2
    old.refresh_from_db()
    assert old.status == Status.SUPERSEDED and old.superseded_by_id == episodes[1].pk
    assert "puppy" in episodes[1].content or "Max" in episodes[1].content


def test_restated_fact_collapses_into_one_row_with_both_asserters(writer, world):
    session = writer.session("alice", "s2")
    writer.say(
        "alice",
        session,
        ("Melanie", "I live in Boston.", MAY8),
        ("Caroline", "Melanie lives in Boston, right next to the park.", MAY8),
    )
    writer.consolidate(session)
    facts = [f for f in derived("fact") if "lives in Boston" in f.content]
    assert len(facts) == 1
    rel = Relationship.objects.get(statement=facts[0])
    assert rel.asserted_by == ["Melanie", "Caroline"]
    assert facts[0].derived_from.count() == 2


def test_topic_covers_the_facts_of_an_entity(writer, world, settings):
    settings.MNEMO_TOPIC_MIN_FACTS = 2
    session = writer.session("alice", "s3")
    writer.say(
        "alice",
        session,
        ("Melanie", "I live in Boston. I love pottery. I play the violin.", MAY8),
    )
    writer.consolidate(session)
    (topic,) = derived("topic")
    assert topic.content.startswith("About Melanie: Melanie lives in Boston")
    facts = {f.pk for f in derived("fact")}
    assert set(topic_covers([topic.pk])[topic.pk]) >= facts
    assert set(topic.metadata["covers"]) >= facts


def test_a_long_run_is_split_and_a_later_run_reads_only_its_last_segment(
    writer, world, settings, monkeypatch
):
    """No gap, more than MNEMO_EPISODE_MAX_MESSAGES: episodes of at most that many
    messages; the next consolidation reads the last segment and the new messages
    only, and leaves the full segment's episode as it was."""
    from memory.consolidation import episodes

    settings.MNEMO_EPISODE_MAX_MESSAGES = 3
    session = writer.session("alice", "long-run")
    lines = [
        "I went to a pottery class with Rosa.",
        "Then we walked to the harbour in Oslo.",
        "Rosa bought a blue bowl there.",
        "I painted the lake at sunrise.",
        "Bruno called about the trip to Bergen.",
        "We booked the train for Friday.",
    ]
    first = writer.say("alice", session, *[("Caroline", t, MAY8) for t in lines[:4]])
    writer.consolidate(session)

    def active():
        return sorted(
            (e.metadata["segment_start"], e.metadata["segment_end"])
            for e in derived("episode", session=session, status=Status.ACTIVE)
        )

    assert active() == [(first[0].pk, first[2].pk), (first[3].pk, first[3].pk)]
    full_segment = derived("episode", session=session, status=Status.ACTIVE)[0]

    read: list[int] = []
    real = episodes.segments

    def recording(messages):
        read.append(len(messages))
        return real(messages)

    monkeypatch.setattr(episodes, "segments", recording)
    more = writer.say("alice", session, *[("Caroline", t, MAY8) for t in lines[4:]])
    writer.consolidate(session)
    assert read == [3]  # the 4th message and the two new ones, not all six
    assert active() == [(first[0].pk, first[2].pk), (first[3].pk, more[-1].pk)]
    full_segment.refresh_from_db()
    assert full_segment.status == Status.ACTIVE
    # a full rebuild reads everything and finds the same episodes
    read.clear()
    writer.consolidate(session, full=True)
    assert read == [6]
    assert active() == [(first[0].pk, first[2].pk), (first[3].pk, more[-1].pk)]
