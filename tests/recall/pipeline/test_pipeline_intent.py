"""Query intent: entities, time windows, answer types, keywords and variants.

Every case resolves against Thursday 2023-06-15 12:00 UTC.
"""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from recall.pipeline.intent import profile_intent
from recall.pipeline.temporal import resolve_time_window

REFERENCE = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)
KNOWN = ("Melanie", "Support Group")


def day(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


ENTITY_CASES = [
    ("What did Caroline research?", ("Caroline",)),
    ("Who is Caroline's mom?", ("Caroline",)),
    ("Where was James’ car?", ("James",)),
    ("When did melanie paint a sunrise?", ("Melanie",)),
    ("How many times has John visited New York?", ("John", "New York")),
    ("Did Caroline go to the support group?", ("Caroline", "Support Group")),
    ("I'm curious what Jon's plans are", ("Jon",)),
    ("Tell me about Gina's store in Paris.", ("Gina", "Paris")),
    ("What did Caroline do in May?", ("Caroline",)),
    ("What did Tim and Tim's sister do on Monday?", ("Tim",)),
    ("what is the weather like", ()),
]


@pytest.mark.parametrize(("query", "entities"), ENTITY_CASES)
def test_entities_are_found_and_cleaned(query, entities):
    intent = profile_intent(query, reference_time=REFERENCE, known_entities=KNOWN)
    assert intent.entities == entities


WINDOW_CASES = [
    ("What did Caroline do yesterday?", day(2023, 6, 14), day(2023, 6, 15), "day"),
    ("What happened today?", day(2023, 6, 15), day(2023, 6, 16), "day"),
    ("Where did we eat last night?", day(2023, 6, 14), day(2023, 6, 15), "day"),
    ("What did I say 3 days ago?", day(2023, 6, 12), day(2023, 6, 13), "day"),
    ("What did I buy two days ago?", day(2023, 6, 13), day(2023, 6, 14), "day"),
    ("Who called a week ago?", day(2023, 6, 5), day(2023, 6, 12), "week"),
    ("What did Jon do two weeks ago?", day(2023, 5, 29), day(2023, 6, 5), "week"),
    ("Plans from a couple of weeks ago?", day(2023, 5, 29), day(2023, 6, 5), "week"),
    ("What happened 3 months ago?", day(2023, 3, 1), day(2023, 4, 1), "month"),
    ("Where did we go two years ago?", day(2021, 1, 1), day(2022, 1, 1), "year"),
    ("What happened a few days ago?", day(2023, 6, 11), day(2023, 6, 14), "range"),
    ("What did Gina do last week?", day(2023, 6, 5), day(2023, 6, 12), "week"),
    ("Any news this week?", day(2023, 6, 12), day(2023, 6, 19), "week"),
    ("How was last month?", day(2023, 5, 1), day(2023, 6, 1), "month"),
    ("What changed this month?", day(2023, 6, 1), day(2023, 7, 1), "month"),
    ("What did Caroline achieve last year?", day(2022, 1, 1), day(2023, 1, 1), "year"),
    ("What did we do last Monday?", day(2023, 6, 12), day(2023, 6, 13), "day"),
    ("Who came last Thursday?", day(2023, 6, 8), day(2023, 6, 9), "day"),
    ("Where did Tim travel last June?", day(2022, 6, 1), day(2022, 7, 1), "month"),
    ("What happened last March?", day(2023, 3, 1), day(2023, 4, 1), "month"),
    ("What did I read in May?", day(2023, 5, 1), day(2023, 6, 1), "month"),
    ("Where was I in July?", day(2022, 7, 1), day(2022, 8, 1), "month"),
    ("What happened in May 2022?", day(2022, 5, 1), day(2022, 6, 1), "month"),
    ("Events of March 2021", day(2021, 3, 1), day(2021, 4, 1), "month"),
    ("What did Caroline do in 2022?", day(2022, 1, 1), day(2023, 1, 1), "year"),
    ("What happened on 8 May 2023?", day(2023, 5, 8), day(2023, 5, 9), "day"),
    ("What happened on May 8, 2023?", day(2023, 5, 8), day(2023, 5, 9), "day"),
    ("Who visited on the 3rd of May?", day(2023, 5, 3), day(2023, 5, 4), "day"),
    ("What was said on 2023-05-08?", day(2023, 5, 8), day(2023, 5, 9), "day"),
    ("What was said on 12/25/2022?", day(2022, 12, 25), day(2022, 12, 26), "day"),
    ("The week before May 8, 2023?", day(2023, 5, 1), day(2023, 5, 8), "week"),
    ("The day after 8 May 2023?", day(2023, 5, 9), day(2023, 5, 10), "day"),
    ("What happened before 2020?", day(1900, 1, 1), day(2020, 1, 1), "range"),
    ("What happened after May 2023?", day(2023, 6, 1), REFERENCE, "range"),
    ("What changed since last week?", day(2023, 6, 5), REFERENCE, "range"),
    ("Calls in the last 3 days", REFERENCE - timedelta(days=3), REFERENCE, "range"),
    ("What did we do over the weekend?", day(2023, 6, 10), day(2023, 6, 12), "range"),
]


@pytest.mark.parametrize(("query", "start", "end", "granularity"), WINDOW_CASES)
def test_time_phrases_resolve_to_windows(query, start, end, granularity):
    window = profile_intent(query, reference_time=REFERENCE).window
    assert window is not None
    assert (window.start, window.end, window.granularity) == (start, end, granularity)
    assert window.phrase.lower() in query.lower()


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what Caroline likes?",
        "What does Melanie paint?",
        "How many dogs does Jon have?",
        "Tell me about the march for equality",
    ],
)
def test_queries_without_a_time_phrase_have_no_window(query):
    assert profile_intent(query, reference_time=REFERENCE).window is None


def test_windows_keep_the_reference_time_zone():
    tokyo = timezone(timedelta(hours=9))
    reference = datetime(2023, 6, 15, 1, 0, tzinfo=tokyo)
    window = resolve_time_window("yesterday", reference_time=reference)
    assert window is not None
    assert window.start == datetime(2023, 6, 14, tzinfo=tokyo)
    assert window.start.utcoffset() == timedelta(hours=9)


def test_a_naive_reference_time_is_taken_as_utc():
    window = resolve_time_window("today", reference_time=datetime(2023, 6, 15, 12))
    assert window is not None
    assert window.start == day(2023, 6, 15)


ANSWER_TYPE_CASES = [
    ("Who did Caroline meet?", "person"),
    ("Whose dog is Max?", "person"),
    ("Where did Melanie camp?", "place"),
    ("Which city did Tim move to?", "place"),
    ("When did Caroline go to the LGBTQ support group?", "time"),
    ("What year did Jon open his studio?", "time"),
    ("What time is the meeting?", "time"),
    ("How long ago did Gina start dancing?", "time"),
    ("How many children does Melanie have?", "count"),
    ("How much did the bike cost?", "count"),
    ("How long has Melanie been running?", "duration"),
    ("Why did Caroline start painting?", "reason"),
    ("How did Joanna learn to swim?", "manner"),
    ("Did Caroline go to the park?", "yesno"),
    ("Is Jon a dancer?", "yesno"),
    ("Have they met before?", "yesno"),
    ("What did Caroline research?", "thing"),
    ("Which book did Jon like?", "thing"),
    ("And where did they go next?", "place"),
    ("Tell me about Caroline", None),
]


@pytest.mark.parametrize(("query", "answer_type"), ANSWER_TYPE_CASES)
def test_answer_type_follows_the_question_word(query, answer_type):
    assert profile_intent(query, reference_time=REFERENCE).answer_type == answer_type


def test_keywords_are_lowercase_content_words_in_order():
    intent = profile_intent(
        "How many times has John's sister visited New York? John's!",
        reference_time=REFERENCE,
    )
    assert intent.keywords == ("times", "john", "sister", "visited", "new", "york")


@pytest.mark.parametrize(
    ("query", "keywords"),
    [
        (
            "How many years older am I than when I graduated from college?",
            ("years", "older", "graduated", "college", "old", "age"),
        ),
        ("How old is Melanie's son?", ("old", "melanie", "son", "age")),
        ("What age did Jon start dancing?", ("age", "jon", "start", "dancing", "old")),
        (
            "Is my younger brother taller?",
            ("younger", "brother", "taller", "old", "age"),
        ),
        ("What did Jon learn in school?", ("jon", "learn", "school")),  # no age words
        ("Did Gina visit the Old Town?", ("gina", "visit", "old", "town")),  # not age
    ],
)
def test_age_questions_also_look_for_old_and_age(query, keywords):
    """A row answers an age question with "a 32-year-old" or "at the age of": the
    comparative in the question ("older") shares no stem with either."""
    assert profile_intent(query, reference_time=REFERENCE).keywords == keywords


def test_keyword_variant_is_the_default_and_only_variant():
    intent = profile_intent(
        "When did Melanie paint a sunrise?", reference_time=REFERENCE
    )
    assert intent.variants == ("melanie paint sunrise",)


def test_variant_styles_follow_the_keyword_variant_in_order():
    intent = profile_intent(
        "When did Melanie paint a sunrise?",
        reference_time=REFERENCE,
        variant_styles=("type_anchored", "declarative", "original"),
    )
    assert intent.variants == (
        "melanie paint sunrise",
        "melanie paint sunrise date",
        "Melanie paint a sunrise",
        "When did Melanie paint a sunrise?",
    )


def test_variants_are_deduplicated_and_capped():
    intent = profile_intent(
        "What did Caroline research?",
        reference_time=REFERENCE,
        max_variants=2,
        variant_styles=("declarative", "type_anchored", "original"),
    )
    # "Caroline research" repeats the keywords and "thing" has no anchor.
    assert intent.variants == ("caroline research", "What did Caroline research?")


def test_a_query_without_keywords_uses_itself_as_the_variant():
    intent = profile_intent("What is it?", reference_time=REFERENCE)
    assert intent.keywords == ()
    assert intent.variants == ("What is it?",)


def test_bad_variant_arguments_are_refused():
    with pytest.raises(ValueError):
        profile_intent("x", reference_time=REFERENCE, max_variants=0)
    with pytest.raises(ValueError):
        profile_intent("x", reference_time=REFERENCE, variant_styles=("poetic",))


@pytest.mark.parametrize(
    ("query", "keywords"),
    [
        (
            "What is the order of the three trips I took, from earliest to latest?",
            ("three", "trips", "took"),
        ),
        ("In what order did I visit Paris and Rome?", ("visit", "paris", "rome")),
        (
            "List the concerts in chronological order from first to last",
            ("concerts",),
        ),
        ("Show my trips chronologically", ("trips",)),
        # The same words with content: an order placed, a latest project.
        (
            "Was my first order from HelloFresh cheaper?",
            ("first", "order", "hellofresh", "cheaper"),
        ),
        (
            "What did Mel paint in her latest project?",
            ("mel", "paint", "latest", "project"),
        ),
    ],
)
def test_an_ordering_frame_is_not_a_keyword(query, keywords):
    """ "the order of ..., from earliest to latest" says how to sort the answer; as
    keywords it ranked a turn about ordering takeout above the trips asked about."""
    assert profile_intent(query, reference_time=REFERENCE).keywords == keywords
