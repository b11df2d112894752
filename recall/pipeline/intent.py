"""Query intent without an LLM: entities, time window, answer type, variants."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from recall.pipeline.temporal import MONTHS, WEEKDAYS, TimeWindow, resolve_time_window

__all__ = ["Intent", "TimeWindow", "VARIANT_STYLES", "profile_intent"]

VARIANT_STYLES = ("original", "keywords", "declarative", "type_anchored")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


AUXILIARIES = _words(
    "is are am was were be been do does did can could will would shall should "
    "may might must has have had"
)
YES_NO_STARTERS = _words(
    "is are was were did does do can has have could would will should"
)
QUESTION_WORDS = _words("what which who whom whose where when why how")
# Imperative openers ("Tell me about ...") that carry no content.
REQUEST_WORDS = _words(
    "tell list name describe give show find remind summarize summarise explain "
    "recall remember please"
)
LEADING_FILLERS = _words("and so ok okay hey also but then well")
STOPWORDS = (
    _words("""
        a an the and or but if then else of at by for with about against between
        into through during before after above below to from up down in out on off
        over under again further once here there all any both each few more most
        other some such no nor not only own same so than too very just also s t
        i me my myself we our ours ourselves you your yours yourself yourselves he
        him his himself she her hers herself it its itself they them their theirs
        themselves this that these those am being having doing ever even
        anything something someone anyone everything thing things get got
        ago last kind sort lot lots really like one ones ca wo
        """)
    | AUXILIARIES
    | QUESTION_WORDS
    | REQUEST_WORDS
    | LEADING_FILLERS
)
# Full month names only: "Jan" or "Sept" alone are more likely names than dates.
_MONTH_NAMES = frozenset(name for name, n in MONTHS.items() if len(name) > 4) | {
    "may",
    "june",
    "july",
}
_NOT_ENTITIES = STOPWORDS | _MONTH_NAMES | frozenset(WEEKDAYS)

_ANSWER_TYPE = re.compile(
    r"\b(how\s+(?:many|much|often)|how\s+long\s+ago|how\s+long|"
    r"(?:what|which)\s+(?:time|year|date|day|month|week|decade)|"
    r"(?:what|which)\s+(?:city|country|town|place|state|location|restaurant)|"
    r"who|whom|whose|where|when|why|how|what|which)\b"
)
_HOW_QUANTITY = re.compile(r"\bhow\s+(?:many|much|often|long)\b")
# A question about someone's age ("how old", "how many years older", "what age") is
# answered by a row that says "a 32-year-old", "at the age of 30": Snowball keeps
# "older" / "younger" as they are, so "old" and "age" join the keywords.
_AGE_QUESTION = re.compile(
    r"\b(?:how\s+old|older|oldest|younger|youngest|elder|eldest|what\s+age|age)\b"
)
AGE_TERMS = ("old", "age")
# How an ordering question asks for its answer ("what is the order of the three
# trips ..., from earliest to latest"): the frame says how to sort what the question
# is about, and as keywords "order" ranked "ordering takeout" first. The words stay
# when they carry content ("my first order from HelloFresh", "their latest project").
_ORDER_FRAME = re.compile(
    r"\bthe\s+order\s+of\b|\bin\s+(?:what|which|chronological)\s+order\b|"
    r"\bfrom\s+(?:the\s+)?(?:earliest|first|oldest)\s+to\s+(?:the\s+)?"
    r"(?:latest|last|newest|most\s+recent)\b|\bchronologically\b"
)
_TYPE_OF_WORD = {
    "who": "person",
    "whom": "person",
    "whose": "person",
    "where": "place",
    "when": "time",
    "why": "reason",
    "how": "manner",
    "what": "thing",
    "which": "thing",
}
ANCHORS = {
    "time": "date",
    "place": "place",
    "person": "person",
    "count": "number",
    "duration": "duration",
    "reason": "because",
    "manner": "method",
}
_WORD = re.compile(r"\w+(?:['’]\w+)*")
# Possessive 's and contractions ('m, 've, 'll, 'd, 're, n't) are cut off.
_SUFFIX = re.compile(r"(?:n['’]t|['’](?:s|m|ve|ll|d|re)?)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Intent:
    """What a query asks for, derived by rules from its text."""

    query: str
    entities: tuple[str, ...]
    window: TimeWindow | None
    answer_type: str | None
    keywords: tuple[str, ...]
    variants: tuple[str, ...]


def _normalise(query: str) -> str:
    return query.replace("’", "'").strip()


def _strip_word(word: str) -> str:
    return _SUFFIX.sub("", word.strip('.,;:!?"()[]-'))


def _lead_words(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text)]
    while words and words[0] in LEADING_FILLERS:
        words.pop(0)
    return words


def detect_answer_type(query: str) -> str | None:
    """Return the expected answer type of ``query``, or None when no rule fires.

    A leading auxiliary ("Did", "Is", ...) makes it a yes/no question; otherwise
    the first question word decides: who -> person, where -> place, when and
    "what year/date/time" and "how long ago" -> time, "how many/much/often" ->
    count, "how long" -> duration, why -> reason, how -> manner, what/which ->
    thing ("which city" -> place).
    """
    text = _normalise(query).lower()
    words = _lead_words(text)
    if words and words[0] in YES_NO_STARTERS:
        return "yesno"
    match = _ANSWER_TYPE.search(text)
    if match is None:
        return None
    phrase = " ".join(match[1].split())
    head = phrase.split()[0]
    if phrase in ("how many", "how much", "how often"):
        return "count"
    if phrase == "how long ago":
        return "time"
    if phrase == "how long":
        return "duration"
    if head in ("what", "which") and " " in phrase:
        noun = phrase.split()[1]
        times = {"time", "year", "date", "day", "month", "week", "decade"}
        return "time" if noun in times else "place"
    return _TYPE_OF_WORD[head]


def extract_keywords(query: str) -> tuple[str, ...]:
    """Lowercase content words of ``query`` in order, stopwords removed, deduped."""
    keywords: dict[str, None] = {}
    text = _HOW_QUANTITY.sub(" ", _normalise(query).lower())
    text = _ORDER_FRAME.sub(" ", text)
    for raw in _WORD.findall(text):
        word = _strip_word(raw)
        if not word or word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        keywords.setdefault(word, None)
    if keywords and _AGE_QUESTION.search(text):
        for term in AGE_TERMS:
            keywords.setdefault(term, None)
    return tuple(keywords)


def _known_matches(query: str, known: Sequence[str]) -> list[tuple[int, int, str]]:
    found = []
    for name in known:
        name = name.strip()
        if not name:
            continue
        pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, name.split())) + r"(?!\w)"
        match = re.search(pattern, query, re.IGNORECASE)
        if match:
            found.append((match.start(), match.end(), name))
    return found


def _capitalised_spans(query: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    current: list[tuple[int, int, str]] = []

    def flush() -> None:
        if current:
            text = " ".join(word for _, _, word in current)
            spans.append((current[0][0], current[-1][1], text))
            current.clear()

    previous_end = 0
    for match in _WORD.finditer(query):
        gap = query[previous_end : match.start()]
        if gap.strip():
            flush()
        previous_end = match.end()
        raw = match.group()
        word = _strip_word(raw)
        capitalised = raw[:1].isupper() and word.lower() not in _NOT_ENTITIES
        if not word or not capitalised:
            flush()
            continue
        current.append((match.start(), match.end(), word))
        if word != raw.strip('.,;:!?"()[]-'):  # a possessive ends the name
            flush()
    flush()
    return spans


def extract_entities(query: str, known_entities: Sequence[str] = ()) -> tuple[str, ...]:
    """Entities named in ``query``: known names first spelled as given, then
    capitalised spans that are not stopwords, question words, months or
    weekdays. Possessive 's and trailing punctuation are stripped; the result
    is ordered by position and deduplicated case-insensitively.
    """
    known = _known_matches(query, known_entities)
    found = list(known)
    for start, end, text in _capitalised_spans(query):
        if any(start < k_end and k_start < end for k_start, k_end, _ in known):
            continue
        found.append((start, end, text))
    seen: set[str] = set()
    entities = []
    for _, _, name in sorted(found, key=lambda item: (item[0], -item[1])):
        if name.lower() not in seen:
            seen.add(name.lower())
            entities.append(name)
    return tuple(entities)


def declarative(query: str) -> str:
    """Turn a question into a rough statement by dropping its question word and
    auxiliary: "Where did Caroline move?" -> "Caroline move"."""
    words = _WORD.findall(_normalise(query))
    while words and words[0].lower() in LEADING_FILLERS:
        words.pop(0)
    lowered = [w.lower() for w in words]
    if lowered and lowered[0] in QUESTION_WORDS:
        drop = 2 if lowered[:2] in (["how", "many"], ["how", "much"]) else 1
        words, lowered = words[drop:], lowered[drop:]
        for index in range(min(2, len(lowered))):
            if _strip_word(lowered[index]) in AUXILIARIES:
                del words[index]
                break
    elif lowered and lowered[0] in YES_NO_STARTERS:
        words = words[1:]
    return " ".join(words)


def profile_intent(
    query: str,
    *,
    reference_time: datetime,
    known_entities: Sequence[str] = (),
    max_variants: int = 4,
    variant_styles: Sequence[str] = ("keywords",),
) -> Intent:
    """Profile ``query``: entities, time window, answer type, keywords, variants.

    The keyword variant always comes first (the query itself when it has no
    keywords); the other requested styles follow in the order given, skipping
    empty or repeated strings, up to ``max_variants``. Styles: "original",
    "keywords", "declarative", "type_anchored" (keywords plus a word for the
    expected answer, e.g. "date" for when-questions).
    """
    if max_variants < 1:
        raise ValueError("max_variants must be >= 1")
    unknown = set(variant_styles) - set(VARIANT_STYLES)
    if unknown:
        raise ValueError(f"unknown variant styles: {sorted(unknown)}")
    keywords = extract_keywords(query)
    answer_type = detect_answer_type(query)
    keyword_text = " ".join(keywords) or query.strip()
    by_style = {
        "keywords": keyword_text,
        "original": query.strip(),
        "declarative": declarative(query),
        "type_anchored": (
            f"{keyword_text} {ANCHORS[answer_type]}" if answer_type in ANCHORS else ""
        ),
    }
    variants: list[str] = []
    for style in ("keywords", *variant_styles):
        text = by_style[style]
        if text and text.lower() not in {v.lower() for v in variants}:
            variants.append(text)
    return Intent(
        query=query,
        entities=extract_entities(query, known_entities),
        window=resolve_time_window(query, reference_time=reference_time),
        answer_type=answer_type,
        keywords=keywords,
        variants=tuple(variants[:max_variants]),
    )
