"""Does a row hold the kind of answer a question asks for?

The intent profiler gives an expected answer type ("how many" -> count, "when" ->
time, "who" -> person, ...). A row that can answer such a question carries a
matching expression: a number for a count, a date or weekday for a time, a number
with a unit for a duration, a proper name for a person or place. Rows that do get
the request's ``answer_type_boost`` (default 1.0: off) after fusion. Types with no
reliable surface form (reason, manner, thing, yes/no) never match.
"""

from __future__ import annotations

import re

from recall.pipeline.temporal import MONTHS, WEEKDAYS

_NUMBER_WORDS = (
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
    "eighty", "ninety", "hundred", "thousand", "million", "dozen", "half", "couple",
)  # fmt: skip
_NUMBER = r"(?:\d+(?:[.,]\d+)*|" + "|".join(_NUMBER_WORDS) + r")"
_COUNT = re.compile(rf"(?<![\w-]){_NUMBER}(?![\w-])|[$€£%]\s?\d", re.IGNORECASE)
_UNITS = (
    r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|years?|"
    r"decades?|semesters?|seasons?)"
)
_DURATION = re.compile(
    rf"(?<![\w-])(?:{_NUMBER}|an?|few|several)[\s-]+(?:\w+[\s-]+)?{_UNITS}\b",
    re.IGNORECASE,
)
_TIME_WORDS = sorted(
    {m for m in MONTHS if len(m) > 3 and m != "may"} | {f"{d}s?" for d in WEEKDAYS}
)
_TIME = re.compile(
    r"\b(?:"
    + "|".join(_TIME_WORDS)
    + r"|(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th)|\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?|"
    r"yesterday|today|tonight|tomorrow|weekend|ago|last\s+(?:week|month|year|night)|"
    r"next\s+(?:week|month|year)|morning|afternoon|evening|noon|midnight|"
    r"\d{1,2}(?::\d\d)?\s?(?:am|pm|a\.m\.|p\.m\.))\b",
    re.IGNORECASE,
)
# A capitalised word that does not start a sentence: a name (person or place).
_NAME = re.compile(r"(?<=[a-z,;:]\s)(?!I\b)[A-Z][a-z]+")
_PLACE = re.compile(
    r"\b(?:in|at|to|from|near|visited|visiting)\s+(?:the\s+)?[A-Z][a-z]+",
)

_MATCHERS: dict[str, re.Pattern[str]] = {
    "count": _COUNT,
    "duration": _DURATION,
    "time": _TIME,
    "person": _NAME,
    "place": _PLACE,
}


def answer_type_matches(answer_type: str | None, text: str) -> bool:
    """Whether ``text`` contains an expression of ``answer_type``."""
    matcher = _MATCHERS.get(answer_type or "")
    return bool(matcher and matcher.search(text))


def answer_type_multipliers(
    answer_type: str | None, texts: dict[int, str], boost: float
) -> dict[int, dict[str, float]]:
    """``{id: {"answer_type": boost}}`` for the rows whose text matches."""
    if boost == 1.0 or answer_type not in _MATCHERS:
        return {}
    return {
        mid: {"answer_type": boost}
        for mid, text in texts.items()
        if answer_type_matches(answer_type, text)
    }
