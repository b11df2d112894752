"""The consolidation's text rules: sentence splitting and date resolution (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memory.consolidation.dates import annotate, resolve_dates
from memory.consolidation.observations import attribute, observe, split_sentences
from memory.consolidation.types import MessageView

REF = date(2023, 3, 27)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "By the way, I saw my physician, Dr. Smith, on March 3rd. He said ok.",
            [
                "By the way, I saw my physician, Dr. Smith, on March 3rd.",
                "He said ok.",
            ],
        ),
        ("We flew to St. Louis with Mrs. Jones. It rained.", None),
        ("I read J. K. Rowling. Good!", ["I read J. K. Rowling.", "Good!"]),
        ("So do I. Yes.", ["So do I.", "Yes."]),
        (
            "I said no. We sat in the sun. Fine.",
            ["I said no.", "We sat in the sun.", "Fine."],
        ),
        ('Wow! "Great." Then.', ["Wow!", '"Great."', "Then."]),
        ("Dinner at 7 p.m. with Sam. Fun.", ["Dinner at 7 p.m. with Sam.", "Fun."]),
        ("One line\nanother line", ["One line", "another line"]),
    ],
)
def test_sentences_do_not_end_at_abbreviations_or_initials(text, sentences):
    got = [text[a:b] for a, b in split_sentences(text)]
    if sentences is None:
        sentences = ["We flew to St. Louis with Mrs. Jones.", "It rained."]
    assert got == sentences


@pytest.mark.parametrize(
    ("text", "value", "granularity"),
    [
        ("I saw Dr. Smith on March 3rd", date(2023, 3, 3), "day"),
        ("a BBQ on the 17th of June", date(2023, 6, 17), "day"),
        ("a party on 3 June", date(2023, 6, 3), "day"),
        ("my follow-up is on April 5th", date(2023, 4, 5), "day"),
        ("we met on December 30th", date(2022, 12, 30), "day"),  # nearest, not ahead
        ("on Jan 3", date(2023, 1, 3), "day"),
        ("the 5th of May", date(2023, 5, 5), "day"),
        ("May 5th", date(2023, 5, 5), "day"),
        ("May 5, 2022", date(2022, 5, 5), "day"),
        ("on 3 June 2021", date(2021, 6, 3), "day"),
        ("in May 2023", date(2023, 5, 1), "month"),
    ],
)
def test_day_and_month_without_a_year_take_the_nearest_year(text, value, granularity):
    (found,) = resolve_dates(text, REF)
    assert (found.value, found.granularity) == (value, granularity)


@pytest.mark.parametrize(
    "text", ["I may 2 times", "3 may be enough", "at June 12:30", "February 30th"]
)
def test_the_verb_may_times_and_impossible_days_are_not_dates(text):
    assert resolve_dates(text, REF) == []


def test_a_day_and_month_is_glossed_with_its_year():
    text = "I saw Dr. Smith on March 3rd."
    assert annotate(text, resolve_dates(text, REF)) == (
        "I saw Dr. Smith on March 3rd (3 March 2023)."
    )


@pytest.mark.parametrize(
    ("text", "event"),
    [
        ("I moved in 2019 and started the job on March 3rd.", date(2023, 3, 3)),
        (
            "I used it up last Saturday, which was on the 17th of June.",
            date(2023, 3, 25),  # the first of two days named
        ),
        ("We went there last month.", date(2023, 2, 1)),
        ("I love hiking.", None),
    ],
)
def test_an_observation_is_dated_by_its_most_specific_date(text, event):
    message = MessageView(
        id=1,
        content=text,
        speaker="Sam",
        role="user",
        occurred_at=datetime(2023, 3, 27, 12, tzinfo=UTC),
    )
    drafts = observe(message, min_salience=0)
    assert [d.event_date for d in drafts] == [event]


@pytest.mark.parametrize(
    ("text", "observed"),
    [
        (
            "I started a diorama with a German Tiger I tank.",
            "user started a diorama with a German Tiger I tank.",
        ),
        (
            "In World War I I lost my grandfather.",
            "In World War I user lost user's grandfather.",
        ),
        ("I have Type I diabetes.", "user has Type I diabetes."),
        ("On Monday I went to Paris.", "On Monday user went to Paris."),
        ("Mark and I went out.", "Mark and user went out."),
        ("I told Peter I would come.", "user told Peter user would come."),
    ],
)
def test_a_roman_numeral_i_is_not_the_speaker(text, observed):
    assert attribute(text, "user") == observed
