"""Loaders for the public memory-retrieval benchmarks (LoCoMo, LongMemEval).

Pure Python (no Django): the ``evaluate`` management command ingests what these
loaders return through Mnemo's own write path and scores the recall output with
:mod:`recall.evaluation.metrics`. Data is read in place (never copied into the repo).

Identifier conventions (both benchmarks):

* ``turn_id`` is ``f"{session_id}:{n}"``, unique **within one conversation**
  only. LoCoMo keeps its ``dia_id`` (``D3:7`` = 7th turn of session ``D3``,
  1-based); LongMemEval uses the 0-based turn index (``"answer_x_1:0"``; the
  official code would call it ``answer_x_1_1``). Ingest each conversation into
  its own scope (or prefix the ids with ``conversation_id``): LongMemEval
  haystacks share filler sessions across questions and every LoCoMo
  conversation has a ``D1:1``.
* :func:`session_of_turn` maps a turn id back to its session id.

Protocol notes (see ``shared/datasets/*/SOURCE.md``):

* LoCoMo evidence is normalised with ``D\\s*:?\\s*(\\d+)\\s*:\\s*(\\d+)`` (so packed
  strings such as ``"D8:6; D9:17"`` yield two ids and ``"D30:05"`` becomes
  ``D30:5``); ids that are not turns of the conversation (``"D"``, ``"D10:19"`` in
  conv-42) are dropped. Questions left without evidence get a ``skip_reason``.
* LongMemEval keys are **user turns only** (:attr:`BenchTurn.is_key`); assistant
  turns are loaded (``is_key=False``) so an ingester may store them, but rankings
  must be filtered to :attr:`BenchConversation.key_turn_ids` before scoring to
  follow the official protocol. Gold turns are user turns with ``has_answer`` in
  the answer sessions; gold sessions are the answer sessions holding such a turn
  (the official ``run_retrieval.py`` rule, which is narrower than
  ``answer_session_ids`` for 7 of the 71 scored dev questions). ``_abs`` questions
  and questions whose evidence is only on the assistant side are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")

LOCOMO_CATEGORY_NAMES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
"""Verified LoCoMo category mapping (mem0's evaluation uses a wrong one)."""

_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY_RE = re.compile(r"session_(\d+)")
_LOCOMO_DATE_RE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_LME_DATE_RE = re.compile(
    r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*"
)
_MONTH_NAMES = (
    "january february march april may june july august september october november"
    " december"
)
_MONTHS = {m[:3]: i for i, m in enumerate(_MONTH_NAMES.split(" "), start=1)}

SKIP_NO_EVIDENCE = "no valid evidence turn after normalisation"
SKIP_ABSTENTION = "abstention question (_abs): no evidence, skipped by protocol"
SKIP_NO_USER_TARGET = "evidence only in assistant turns: no user-side target"


@dataclass(frozen=True, slots=True)
class BenchTurn:
    """One utterance. ``text`` excludes the speaker name (prefix it if wanted)."""

    turn_id: str
    speaker: str
    role: str  # 'user' | 'assistant' | '' (LoCoMo has two human speakers)
    text: str
    index: int  # 0-based position in the session
    is_key: bool = True  # False: not a retrieval target under the protocol


@dataclass(frozen=True, slots=True)
class BenchSession:
    """A dated session of turns."""

    session_id: str
    started_at: datetime  # tz-aware, UTC (the datasets carry no zone)
    turns: tuple[BenchTurn, ...]


@dataclass(frozen=True, slots=True)
class BenchQuestion:
    """A question with its evidence (gold) at turn and session level."""

    question_id: str
    text: str
    category: str  # LoCoMo '1'..'5'; LongMemEval question_type
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    question_date: datetime | None
    answer: str
    skip_reason: str | None = None


@dataclass(frozen=True, slots=True)
class BenchConversation:
    """One retrieval corpus and the questions asked against it."""

    conversation_id: str
    sessions: tuple[BenchSession, ...]
    questions: tuple[BenchQuestion, ...]
    key_turn_ids: frozenset[str] = field(default=frozenset())

    def iter_turns(self) -> Iterable[tuple[BenchSession, BenchTurn]]:
        """Yield ``(session, turn)`` pairs in corpus order."""
        for session in self.sessions:
            for turn in session.turns:
                yield session, turn


def session_of_turn(turn_id: str) -> str:
    """Return the session id of a turn id built by these loaders."""
    return turn_id.rsplit(":", 1)[0]


def _conversation(
    conversation_id: str,
    sessions: Sequence[BenchSession],
    questions: Sequence[BenchQuestion],
) -> BenchConversation:
    keys = frozenset(t.turn_id for s in sessions for t in s.turns if t.is_key)
    return BenchConversation(conversation_id, tuple(sessions), tuple(questions), keys)


def parse_locomo_date(value: str) -> datetime:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"`` as a UTC datetime."""
    m = _LOCOMO_DATE_RE.fullmatch(value)
    month = _MONTHS.get(m.group(5).lower()[:3]) if m else None
    if m is None or month is None:
        raise ValueError(f"unrecognised LoCoMo date: {value!r}")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
    day, year = int(m.group(4)), int(m.group(6))
    return datetime(year, month, day, hour, int(m.group(2)), tzinfo=UTC)


def parse_longmemeval_date(value: str) -> datetime:
    """Parse LongMemEval's ``"2023/05/20 (Sat) 02:21"`` as a UTC datetime."""
    m = _LME_DATE_RE.fullmatch(value)
    if m is None:
        raise ValueError(f"unrecognised LongMemEval date: {value!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def normalise_locomo_evidence(evidence: Iterable[str], valid: set[str]) -> list[str]:
    """Extract ``D<s>:<t>`` ids from raw evidence strings; keep those in ``valid``.

    Order of first occurrence is kept, duplicates are dropped.
    """
    out: list[str] = []
    for raw in evidence:
        for sess, turn in _EVIDENCE_RE.findall(str(raw)):
            dia_id = f"D{int(sess)}:{int(turn)}"
            if dia_id in valid and dia_id not in out:
                out.append(dia_id)
    return out


def _locomo_turn(raw: Mapping[str, Any], session_id: str, pos: int) -> BenchTurn:
    text = str(raw.get("text") or "")
    caption = raw.get("blip_caption")
    if caption:
        text = f"{text} [shares {caption}]" if text else f"[shares {caption}]"
    m = _EVIDENCE_RE.fullmatch(str(raw.get("dia_id") or "").strip())
    dia_id = f"D{int(m.group(1))}:{int(m.group(2))}" if m else ""
    if session_of_turn(dia_id) != session_id:  # never seen upstream
        dia_id = f"{session_id}:{pos + 1}"
    return BenchTurn(dia_id, str(raw.get("speaker") or ""), "", text, pos)


def _locomo_sample(sample: Mapping[str, Any]) -> BenchConversation:
    conv_id = str(sample["sample_id"])
    conv = sample["conversation"]
    numbers = sorted(
        int(m.group(1)) for k in conv if (m := _SESSION_KEY_RE.fullmatch(k))
    )
    sessions = []
    for n in numbers:
        date = conv.get(f"session_{n}_date_time")
        if not date:
            raise ValueError(f"{conv_id}: session_{n} has no date_time")
        sid = f"D{n}"
        turns = tuple(
            _locomo_turn(raw, sid, pos) for pos, raw in enumerate(conv[f"session_{n}"])
        )
        sessions.append(BenchSession(sid, parse_locomo_date(date), turns))
    valid = {t.turn_id for s in sessions for t in s.turns}
    if len(valid) != sum(len(s.turns) for s in sessions):
        raise ValueError(f"{conv_id}: duplicate dia_id")
    questions = []
    for i, qa in enumerate(sample.get("qa", [])):
        gold = normalise_locomo_evidence(qa.get("evidence") or [], valid)
        answer = qa.get("answer")
        if answer is None:
            answer = qa.get("adversarial_answer")
        questions.append(
            BenchQuestion(
                question_id=f"{conv_id}:q{i}",
                text=str(qa["question"]),
                category=str(qa["category"]),
                gold_turns=frozenset(gold),
                gold_sessions=frozenset(session_of_turn(g) for g in gold),
                question_date=None,
                answer="" if answer is None else str(answer),
                skip_reason=None if gold else SKIP_NO_EVIDENCE,
            )
        )
    return _conversation(conv_id, sessions, questions)


def load_locomo(path: str | Path) -> list[BenchConversation]:
    """Load a LoCoMo file (``locomo10.json`` layout: a list of samples).

    Sessions are driven by the ``session_<n>`` keys (conv-26 has extra
    ``*_date_time`` keys). Turn text gets ``" [shares <blip_caption>]"`` appended
    when an image was shared, as the LoCoMo paper feeds its retriever.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, Mapping):
        data = [data]
    return [_locomo_sample(sample) for sample in data]


def _unique_session_ids(ids: Sequence[Any]) -> list[str]:
    """Rename repeated haystack session ids (3 dev haystacks repeat a filler)."""
    seen: dict[str, int] = {}
    out = []
    for raw in ids:
        sid = str(raw)
        seen[sid] = seen.get(sid, 0) + 1
        out.append(sid if seen[sid] == 1 else f"{sid}#{seen[sid]}")
    return out


def _longmemeval_instance(item: Mapping[str, Any]) -> BenchConversation:
    qid = str(item["question_id"])
    answer_ids = {str(s) for s in item.get("answer_session_ids") or []}
    session_ids = _unique_session_ids(item["haystack_session_ids"])
    raw_sessions = item["haystack_sessions"]
    dates = item["haystack_dates"]
    if not len(session_ids) == len(raw_sessions) == len(dates):
        raise ValueError(f"{qid}: haystack ids, sessions and dates differ in length")
    sessions, gold_turns, gold_sessions = [], set(), set()
    any_has_answer = False
    for sid, raw_turns, date in zip(session_ids, raw_sessions, dates, strict=True):
        turns = []
        for i, raw in enumerate(raw_turns):
            role = str(raw.get("role") or "")
            turn = BenchTurn(
                f"{sid}:{i}",
                role,
                role,
                str(raw.get("content") or ""),
                i,
                is_key=role == "user",
            )
            turns.append(turn)
            if raw.get("has_answer") is True and sid in answer_ids:
                any_has_answer = True
                if turn.is_key:
                    gold_turns.add(turn.turn_id)
                    gold_sessions.add(sid)
        sessions.append(BenchSession(sid, parse_longmemeval_date(date), tuple(turns)))
    skip = None
    if "_abs" in qid:
        skip = SKIP_ABSTENTION
    elif not gold_turns:
        skip = SKIP_NO_USER_TARGET if any_has_answer else SKIP_NO_EVIDENCE
    q_date = item.get("question_date")
    question = BenchQuestion(
        question_id=qid,
        text=str(item["question"]),
        category=str(item.get("question_type") or ""),
        gold_turns=frozenset(gold_turns),
        gold_sessions=frozenset(gold_sessions),
        question_date=parse_longmemeval_date(q_date) if q_date else None,
        answer=str(item.get("answer", "")),
        skip_reason=skip,
    )
    return _conversation(qid, sessions, [question])


def _is_instance(obj: Any) -> bool:
    return isinstance(obj, Mapping) and "haystack_sessions" in obj and "question" in obj


def _longmemeval_items(path: Path) -> list[Mapping[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if _is_instance(data):
        return [data]
    if isinstance(data, list) and all(_is_instance(x) for x in data):
        return data
    return []  # e.g. manifest.json


def load_longmemeval(path: str | Path) -> list[BenchConversation]:
    """Load LongMemEval instances; one conversation (haystack) per question.

    ``path`` may be an upstream file (a JSON list of instances, e.g.
    ``longmemeval_s_cleaned.json``), a one-instance file, or a directory of such
    files (``*.json`` directly inside it, sorted by name; non-instance JSON such
    as ``manifest.json`` is ignored). Repeated session ids inside one haystack get
    a ``#<n>`` suffix so every session and turn id stays unique.
    """
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    items = [item for f in files for item in _longmemeval_items(f)]
    if not items:
        raise ValueError(f"no LongMemEval instances found in {path}")
    conversations = [_longmemeval_instance(item) for item in items]
    ids = [c.conversation_id for c in conversations]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate question_id in {path}")
    return conversations


def iter_questions(
    conversations: Sequence[BenchConversation],
    *,
    limit: int | None = None,
    categories: set[str] | None = None,
    include_skipped: bool = False,
) -> list[tuple[BenchConversation, BenchQuestion]]:
    """Return a deterministic ``(conversation, question)`` slice for smoke runs.

    Questions are interleaved round-robin over categories (sorted), and within a
    category round-robin over conversations starting at a per-category offset, so
    a small ``limit`` touches every category and many conversations. With
    ``limit=None`` all eligible questions are returned (same order).
    Skipped questions are left out unless ``include_skipped``.
    """
    by_cat: dict[str, list[list[tuple[BenchConversation, BenchQuestion]]]] = {}
    for conv in conversations:
        per_cat: dict[str, list[tuple[BenchConversation, BenchQuestion]]] = {}
        for q in conv.questions:
            if q.skip_reason and not include_skipped:
                continue
            if categories is not None and q.category not in categories:
                continue
            per_cat.setdefault(q.category, []).append((conv, q))
        for cat, items in per_cat.items():
            by_cat.setdefault(cat, []).append(items)
    queues = []
    for offset, cat in enumerate(sorted(by_cat)):
        lists = by_cat[cat]
        shift = offset % len(lists)
        queues.append(_round_robin(lists[shift:] + lists[:shift]))
    out = _round_robin(queues)
    return out if limit is None else out[: max(limit, 0)]


def _round_robin(lists: Sequence[Sequence[_T]]) -> list[_T]:
    out: list[_T] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out
