"""Which rows hold the kind of answer a question asks for."""

import pytest

from recall.pipeline.answer_type import answer_type_matches, answer_type_multipliers


@pytest.mark.parametrize(
    ("answer_type", "text", "expected"),
    [
        ("count", "I've spotted 27 different species so far", True),
        ("count", "We adopted three cats last spring", True),
        ("count", "It cost me $40 in the end", True),
        ("count", "I love watching the birds in the park", False),
        ("time", "I went to the support group yesterday", True),
        ("time", "my appointment on March 3rd", True),
        ("time", "I have a cocktail-making class on Fridays", True),
        ("time", "we moved here in 2019", True),
        ("time", "You may want to bring a jacket", False),
        ("time", "I like my new camera lens", False),
        ("duration", "it took me 45 minutes to finish", True),
        ("duration", "I've been coughing for a few weeks now", True),
        ("duration", "I ran 5 miles", False),
        ("person", "after the concert I met Brandon Flowers", True),
        ("person", "I went home early", False),
        ("place", "we drove to Denver for the weekend", True),
        ("place", "I think so too", False),
        ("reason", "because it was raining", False),
        ("thing", "27 apples", False),
        (None, "27 apples on March 3rd", False),
    ],
)
def test_answer_type_table(answer_type, text, expected):
    assert answer_type_matches(answer_type, text) is expected


def test_multipliers_only_for_matching_rows_and_never_at_one():
    texts = {1: "on Friday at 5pm", 2: "no date here"}
    assert answer_type_multipliers("time", texts, 1.2) == {1: {"answer_type": 1.2}}
    assert answer_type_multipliers("time", texts, 1.0) == {}
    assert answer_type_multipliers("manner", texts, 1.2) == {}
