"""Facts: subject -predicate-> object statements found in observations (pure rules).

Patterns run over the *attributed* observation text ("Caroline moved to Denver in
March (March 2023)"), so first-person statements already name their subject. Each
predicate is either functional (one current value: ``lives_in``, ``works_at``...) and
therefore able to conflict, or multi-valued (``visited``, ``likes``...), where a new
object adds to the old ones. ``semantic_group`` makes equivalent statements collapse.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memory.consolidation.dates import resolve_dates
from memory.consolidation.types import FactDraft, ObservationDraft
from memory.entities import STOP_CAPITALS, normalize_name

FUNCTIONAL = frozenset(
    {"lives_in", "works_at", "works_as", "married_to", "born_in", "is_from", "age"}
)
CONTENT = {
    "lives_in": "{s} lives in {o}",
    "works_at": "{s} works at {o}",
    "works_as": "{s} works as {o}",
    "married_to": "{s} is married to {o}",
    "born_in": "{s} was born in {o}",
    "is_from": "{s} is from {o}",
    "age": "{s} is {o} years old",
    "likes": "{s} likes {o}",
    "visited": "{s} went to {o}",
    "has": "{s} has {o}",
    "plays": "{s} plays {o}",
    "studies": "{s} studies {o}",
    "attended": "{s} attended {o}",
    "is_a": "{s} is {o}",
}
NEGATED = {
    "lives_in": "{s} no longer lives in {o}",
    "likes": "{s} does not like {o}",
    "works_at": "{s} no longer works at {o}",
}
PLACE_PREDICATES = frozenset({"lives_in", "born_in", "is_from", "visited"})
EVENT_PREDICATES = frozenset({"visited", "attended"})

_S = r"(?P<s>\b[A-Z][\w’'-]+(?:\s[A-Z][\w’'-]+)?)(?!['’]s\b)\s+"
_ADV = r"(?:(?:also|really|currently|now|still|just|recently|finally|actually)\s+)?"
_STOP_WORDS = (
    r"and|but|because|which|who|where|when|with|since|for|after|before|so|to|as|in|"
    r"at|on|every|right|now|too|again|anymore|though|(?:a|an|one|two|three|four|"
    r"five|six|few|couple|several|\d+)(?:\s+of)?\s+(?:days?|weeks?|months?|years?)|"
    r"last|this|next|yesterday|today|tonight|ago|until|in\s+(?:19|20)\d\d|"
    r"in\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
)
_O = rf"(?P<o>[^.,;:!?()\"]+?)(?=\s*(?:[.,;:!?()\"]|\b(?i:{_STOP_WORDS})\b|$))"
_BAD_OBJECT_START = frozenset(
    [
        "that",
        "how",
        "it",
        "it's",
        "what",
        "when",
        "where",
        "why",
        "you",
        "this",
        "those",
        "these",
        "them",
        "him",
        "her",
        "me",
        "us",
        "which",
        "who",
        "being",
        "is",
        "was",
        "are",
        "were",
        "has",
        "had",
    ]
)
_SUBJECT_SKIP = STOP_CAPITALS | frozenset(
    [
        "now",
        "but",
        "and",
        "so",
        "because",
        "plus",
        "still",
        "also",
        "lately",
        "recently",
        "besides",
        "luckily",
        "honestly",
        "anyway",
        "actually",
        "sometimes",
        "yesterday",
        "today",
    ]
)
_NUMBER_O = r"(?P<o>\d{1,3})"


@dataclass(frozen=True)
class Rule:
    predicate: str
    pattern: re.Pattern[str]
    negated: bool = False
    change: bool = False


def _rule(
    predicate: str,
    verb: str,
    *,
    obj: str = _O,
    negated: bool = False,
    change: bool = False,
) -> Rule:
    return Rule(predicate, re.compile(_S + _ADV + verb + r"\s+" + obj), negated, change)


RULES: tuple[Rule, ...] = (
    _rule(
        "lives_in",
        r"(?:no longer|does not|doesn't|doesn’t) live (?:in|at)",
        negated=True,
    ),
    _rule(
        "lives_in",
        r"(?:moved|relocated|has moved|is moving|moved back)\s+to",
        change=True,
    ),
    _rule("lives_in", r"(?:lives|is living|has been living|resides)\s+(?:in|at)"),
    _rule(
        "works_at",
        r"(?:no longer works|quit (?:her|his|their) job)\s+(?:at|for)",
        negated=True,
    ),
    _rule(
        "works_at",
        r"(?:started working|got a job|began working|now works)\s+(?:at|for)",
        change=True,
    ),
    _rule("works_at", r"(?:works|is working|has been working)\s+(?:at|for)"),
    _rule("works_as", r"(?:works|is working|started working)\s+as"),
    _rule("married_to", r"(?:is married to|got married to|married)"),
    _rule("born_in", r"was born in"),
    _rule("is_from", r"(?:is|was|comes) from"),
    _rule(
        "age", r"(?:is|turned|just turned)", obj=_NUMBER_O + r"(?=\s+years?\s+old|\b)"
    ),
    _rule(
        "likes",
        r"(?:does not|doesn't|doesn’t|never) (?:like|love|enjoy)s?",
        negated=True,
    ),
    _rule("likes", r"(?:hates|dislikes|can't stand|can’t stand)", negated=True),
    _rule("likes", r"(?:likes|loves|enjoys|adores|is into|is passionate about)"),
    _rule(
        "visited", r"(?:went|traveled|travelled|has been|took a trip|flew|drove)\s+to"
    ),
    _rule("visited", r"visited"),
    _rule("has", r"(?:has|owns|adopted|bought|got)\s+(?=(?:a|an|two|three|\d+)\b)"),
    _rule("plays", r"(?:plays|played|is playing)"),
    _rule("studies", r"(?:studies|studied|is studying|majored in|is majoring in)"),
    _rule("attended", r"(?:attended|joined|signed up for|went to see|participated in)"),
    _rule("is_a", r"is (?=(?:a|an)\s)"),
)


def semantic_group(subject: str, predicate: str, obj: str) -> str:
    """Equivalent statements (same subject, predicate, object; any wording) share it."""
    key = f"{normalize_name(subject)}|{predicate}|{normalize_object(obj)}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]  # noqa: S324 - a grouping key


def normalize_object(obj: str) -> str:
    words = normalize_name(obj).split()
    while words and words[0] in ("a", "an", "the", "my", "her", "his", "their", "our"):
        words = words[1:]
    return " ".join(words)


def _object_type(predicate: str, obj: str) -> str:
    capitalised = obj[:1].isupper()
    if predicate in PLACE_PREDICATES and capitalised:
        return "place"
    if predicate == "works_at" and capitalised:
        return "organization"
    if predicate == "married_to":
        return "person"
    return "thing"


def extract_facts(obs: ObservationDraft) -> list[FactDraft]:
    """The facts stated by one observation; at most one per (predicate, object)."""
    text = obs.content
    found: list[FactDraft] = []
    seen: set[tuple[str, str]] = set()
    taken: list[tuple[int, int]] = []
    for rule in RULES:
        for m in rule.pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            subject, obj = m.group("s").strip(), m.group("o").strip(" '’\"")
            names = subject.split()
            while names and names[0].lower() in _SUBJECT_SKIP:
                names = names[1:]
            if not names:
                continue
            subject = " ".join(names)
            words = obj.split()
            if subject.endswith(("'s", "’s")) or (
                words and words[0].lower() in _BAD_OBJECT_START
            ):
                continue
            if not words or len(words) > 6 or normalize_object(obj) in STOP_CAPITALS:
                continue
            key = (rule.predicate, normalize_object(obj))
            if key in seen:
                continue
            seen.add(key)
            taken.append((m.start(), m.end()))
            found.append(_draft(obs, rule, subject, obj, text[m.end() :]))
    return found


def _draft(
    obs: ObservationDraft, rule: Rule, subject: str, obj: str, tail: str
) -> FactDraft:
    valid_from = valid_to = None
    tail_dates = resolve_dates(tail[:60], None)
    when = tail_dates[0].value if tail_dates else obs.event_date
    lowered = tail[:40].lower()
    if rule.negated and rule.predicate in FUNCTIONAL or "until" in lowered:
        valid_to = when
    elif rule.change or "since" in lowered or rule.predicate in EVENT_PREDICATES:
        valid_from = when
    template = (NEGATED if rule.negated else CONTENT).get(rule.predicate, "{s} {o}")
    content = template.format(s=subject, o=obj)
    if valid_from and rule.predicate in EVENT_PREDICATES:
        content += f" ({_label(obs, valid_from)})"
    elif valid_from:
        content += f" (since {_label(obs, valid_from)})"
    elif valid_to:
        content += f" (until {_label(obs, valid_to)})"
    return FactDraft(
        message_id=obs.message_id,
        observation=obs.index,
        subject=subject,
        predicate=rule.predicate,
        object=obj,
        content=content,
        negated=rule.negated,
        change=rule.change,
        valid_from=valid_from,
        valid_to=valid_to,
        subject_type="person",
        object_type=_object_type(rule.predicate, obj),
    )


def _label(obs: ObservationDraft, value: object) -> str:
    for d in obs.dates:
        if d.value == value:
            return d.label
    return str(value)
