"""Loader tests on small synthetic files in the LoCoMo and LongMemEval formats."""

import json
from datetime import UTC, datetime

import pytest

from recall.evaluation.datasets import (
    SKIP_ABSTENTION,
    SKIP_NO_EVIDENCE,
    SKIP_NO_USER_TARGET,
    BenchConversation,
    BenchQuestion,
    iter_questions,
    load_locomo,
    load_longmemeval,
    normalise_locomo_evidence,
    parse_locomo_date,
    parse_longmemeval_date,
    session_of_turn,
)


def _turn(speaker, dia_id, text, **extra):
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


LOCOMO_SAMPLE = {
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("Ann", "D1:1", "I adopted a dog."),
            _turn(
                "Bob",
                "D1:2",
                "Look at mine!",
                img_url=["http://x"],
                blip_caption="a photo of a dog",
                query="dog",
            ),
        ],
        "session_2_date_time": "12:05 am on 1 January, 2024",
        "session_2": [
            _turn("Ann", "D2:1", "Happy new year."),
            _turn("Bob", "D2:2", "Same to you."),
        ],
        "session_3_date_time": "9:00 am on 2 January, 2024",  # no session_3
    },
    "qa": [
        {"question": "q0", "answer": "dog", "evidence": ["D1:1"], "category": 4},
        {"question": "q1", "answer": 7, "evidence": ["D1:1; D2:2"], "category": 1},
        {
            "question": "q2",
            "answer": "x",
            "evidence": ["D:1:2", "D2:01"],
            "category": 2,
        },
        {"question": "q3", "answer": "x", "evidence": ["D", "D9:9"], "category": 3},
        {"question": "q4", "answer": "x", "evidence": [], "category": 3},
        {
            "question": "q5",
            "adversarial_answer": "no",
            "evidence": ["D2:2"],
            "category": 5,
        },
    ],
}


@pytest.fixture
def locomo_conv(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([LOCOMO_SAMPLE]))
    (conv,) = load_locomo(path)
    return conv


def test_locomo_sessions_turns_and_dates(locomo_conv):
    assert locomo_conv.conversation_id == "conv-1"
    assert [s.session_id for s in locomo_conv.sessions] == ["D1", "D2"]
    s1, s2 = locomo_conv.sessions
    assert s1.started_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert s2.started_at == datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    first, second = s1.turns
    assert (first.turn_id, first.speaker, first.role, first.index) == (
        "D1:1",
        "Ann",
        "",
        0,
    )
    assert second.text == "Look at mine! [shares a photo of a dog]"
    assert all(t.is_key for _, t in locomo_conv.iter_turns())
    assert len(locomo_conv.key_turn_ids) == 4


def test_locomo_evidence_normalisation_and_skips(locomo_conv):
    q = {x.text: x for x in locomo_conv.questions}
    assert q["q0"].gold_turns == {"D1:1"}
    assert q["q0"].category == "4"
    assert q["q1"].gold_turns == {"D1:1", "D2:2"}  # packed ids split
    assert q["q1"].gold_sessions == {"D1", "D2"}
    assert q["q1"].answer == "7"
    assert q["q2"].gold_turns == {"D1:2", "D2:1"}  # "D:1:2", "D2:01"
    assert q["q3"].gold_turns == frozenset()  # "D" and unknown "D9:9" dropped
    assert q["q3"].skip_reason == SKIP_NO_EVIDENCE
    assert q["q4"].skip_reason == SKIP_NO_EVIDENCE
    assert q["q5"].answer == "no"
    assert q["q5"].skip_reason is None
    assert q["q0"].question_id == "conv-1:q0"
    assert q["q0"].question_date is None


def test_normalise_locomo_evidence_regex():
    valid = {"D8:6", "D9:17", "D30:5", "D11:26"}
    raw = ["D8:6; D9:17", "D30:05", "D:11:26", "D", "D10:19", "D8:6"]
    assert normalise_locomo_evidence(raw, valid) == ["D8:6", "D9:17", "D30:5", "D11:26"]


def test_date_parsers():
    assert parse_locomo_date("12:30 pm on 24 June, 2022") == datetime(
        2022, 6, 24, 12, 30, tzinfo=UTC
    )
    assert parse_longmemeval_date("2023/05/20 (Sat) 02:21") == datetime(
        2023, 5, 20, 2, 21, tzinfo=UTC
    )
    with pytest.raises(ValueError):
        parse_locomo_date("8 May 2023")
    with pytest.raises(ValueError):
        parse_locomo_date("1:56 pm on 8 Mai, 2023")
    with pytest.raises(ValueError):
        parse_longmemeval_date("20/05/2023")


def _lme(qid, qtype, sessions, answer_ids, dates=None):
    ids = [sid for sid, _ in sessions]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"question {qid}?",
        "answer": 42,
        "question_date": "2023/05/30 (Tue) 21:10",
        "haystack_session_ids": ids,
        "haystack_dates": dates or ["2023/05/20 (Sat) 02:21"] * len(ids),
        "haystack_sessions": [turns for _, turns in sessions],
        "answer_session_ids": answer_ids,
    }


def _u(text, has=None):
    turn = {"role": "user", "content": text}
    return turn if has is None else {**turn, "has_answer": has}


def _a(text, has=None):
    turn = {"role": "assistant", "content": text}
    return turn if has is None else {**turn, "has_answer": has}


MAIN = _lme(
    "q_main",
    "multi-session",
    [
        ("filler_1", [_u("hello"), _a("hi")]),
        (
            "answer_x_1",
            [_u("I bought a bike", True), _a("nice", True), _u("ok", False)],
        ),
        ("answer_x_2", [_u("thanks", False), _a("the bike costs $200", True)]),
        ("filler_1", [_u("hello"), _a("hi")]),  # repeated filler session
    ],
    ["answer_x_1", "answer_x_2"],
)
ABS = _lme("q_abs", "temporal-reasoning", [("answer_y", [_u("x", True)])], ["answer_y"])
ASSISTANT_ONLY = _lme(
    "q_ssa",
    "single-session-assistant",
    [("answer_z", [_u("tell me", False), _a("it is 3", True)])],
    ["answer_z"],
)


def test_longmemeval_directory_of_instances(tmp_path):
    (tmp_path / "48_q_main.json").write_text(json.dumps(MAIN))
    (tmp_path / "49_q_abs.json").write_text(json.dumps(ABS))
    (tmp_path / "manifest.json").write_text(json.dumps({"files": []}))
    convs = load_longmemeval(tmp_path)
    assert [c.conversation_id for c in convs] == ["q_main", "q_abs"]
    main = convs[0]
    assert [s.session_id for s in main.sessions] == [
        "filler_1",
        "answer_x_1",
        "answer_x_2",
        "filler_1#2",
    ]
    assert main.sessions[0].started_at == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    turn = main.sessions[1].turns[1]
    assert (turn.turn_id, turn.role, turn.speaker, turn.index, turn.is_key) == (
        "answer_x_1:1",
        "assistant",
        "assistant",
        1,
        False,
    )
    assert session_of_turn("filler_1#2:1") == "filler_1#2"
    assert "filler_1#2:0" in main.key_turn_ids
    assert "answer_x_1:1" not in main.key_turn_ids
    (q,) = main.questions
    assert q.gold_turns == {"answer_x_1:0"}  # user has_answer only
    assert q.gold_sessions == {"answer_x_1"}  # answer_x_2: assistant-side only
    assert q.question_date == datetime(2023, 5, 30, 21, 10, tzinfo=UTC)
    assert (q.category, q.answer, q.skip_reason) == ("multi-session", "42", None)
    assert convs[1].questions[0].skip_reason == SKIP_ABSTENTION


def test_longmemeval_list_file_and_assistant_only_skip(tmp_path):
    path = tmp_path / "longmemeval_s_like.json"
    path.write_text(json.dumps([ASSISTANT_ONLY, MAIN]))
    convs = load_longmemeval(path)
    assert [c.conversation_id for c in convs] == ["q_ssa", "q_main"]
    q = convs[0].questions[0]
    assert q.skip_reason == SKIP_NO_USER_TARGET
    assert q.gold_turns == frozenset()


def test_longmemeval_rejects_empty_or_duplicate(tmp_path):
    with pytest.raises(ValueError):
        load_longmemeval(tmp_path)
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([MAIN, MAIN]))
    with pytest.raises(ValueError):
        load_longmemeval(path)


def _conv(cid, cats, skip_last=False):
    questions = [
        BenchQuestion(
            f"{cid}:q{i}", "?", cat, frozenset({"D1:1"}), frozenset({"D1"}), None, ""
        )
        for i, cat in enumerate(cats)
    ]
    if skip_last:
        q = questions[-1]
        questions[-1] = BenchQuestion(
            q.question_id, "?", q.category, frozenset(), frozenset(), None, "", "x"
        )
    return BenchConversation(cid, (), tuple(questions))


def test_iter_questions_spreads_over_categories_and_conversations():
    convs = [_conv(f"c{i}", ["1", "1", "1", "2", "4", "4", "5"]) for i in range(4)]
    convs.append(_conv("c4", ["3", "3"], skip_last=True))
    picked = iter_questions(convs, limit=10)
    assert len(picked) == 10
    assert {q.category for _, q in picked} == {"1", "2", "3", "4", "5"}
    assert len({c.conversation_id for c, _ in picked}) >= 4
    assert picked == iter_questions(convs, limit=10)  # deterministic
    everything = iter_questions(convs, limit=None)
    assert len(everything) == 4 * 7 + 1  # the skipped one is left out
    assert len(iter_questions(convs, limit=None, include_skipped=True)) == 30
    assert everything[:10] == picked
    only = iter_questions(convs, limit=3, categories={"4"})
    assert [q.category for _, q in only] == ["4", "4", "4"]
    assert len({c.conversation_id for c, _ in only}) == 3
