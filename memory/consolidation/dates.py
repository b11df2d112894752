"""Relative and absolute date phrases -> absolute dates, against a reference time.

Own rules rather than ``dateparser.search_dates``: the rules below cover the phrases
conversations use ("yesterday", "last week", "two weeks ago", "last May", "in March",
"next Friday", "8 May 2023") in microseconds per message, where ``search_dates`` costs
milliseconds and over-matches ordinary words ("may", "march", "sat"). Past-leaning:
a bare month or weekday means the most recent one, as in remembered conversation.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from memory.consolidation.types import ResolvedDate

MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = {
    d: i
    for i, d in enumerate(
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    )
}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_NUM = (
    r"(\d{1,3}|a couple of|a couple|couple of|a few|few|several|an?|one|two|three|"
    r"four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

# Order matters: longer, more specific phrases first; matches never overlap.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "dmy",
        re.compile(
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+(\d{{4}})\b"
        ),
    ),
    (
        "mdy",
        re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"),
    ),
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("my", re.compile(rf"\b(?:in\s+)?{_MONTH}\s+(?:of\s+)?(\d{{4}})\b")),
    # A day and month without a year ("March 3rd", "the 17th of June", "3 June"): the
    # year that puts the date nearest the reference. "May" needs an ordinal or "of".
    (
        "dm",
        re.compile(rf"\b(\d{{1,2}})(st|nd|rd|th)?\s+(of\s+)?{_MONTH}\b(?!\s*\d)"),
    ),
    ("md", re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(st|nd|rd|th)?\b(?![:.,]?\d)")),
    ("day_before_yesterday", re.compile(r"\bthe day before yesterday\b")),
    ("yesterday", re.compile(r"\b(yesterday|last night)\b")),
    (
        "today",
        re.compile(r"\b(today|tonight|this morning|this afternoon|this evening)\b"),
    ),
    ("tomorrow", re.compile(r"\btomorrow\b")),
    ("ago", re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b")),
    ("in_n", re.compile(rf"\bin\s+{_NUM}\s+(day|week|month|year)s?\b")),
    ("rel_weekend", re.compile(r"\b(last|this|next|past)\s+weekend\b")),
    (
        "rel_unit",
        re.compile(
            r"\b(last|this|next|past)\s+(week|month|year|summer|winter|"
            r"spring|fall|autumn)\b"
        ),
    ),
    ("rel_weekday", re.compile(rf"\b(last|this|next|on|past)\s+{_WEEKDAY}\b")),
    ("rel_month", re.compile(rf"\b(last|this|next|in|since|from|until)\s+{_MONTH}\b")),
    ("year", re.compile(r"\b(?:in|since|from|until|of)\s+((?:19|20)\d{2})\b")),
]
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
# "may" is also a verb: "in May" resolves, "I may go" does not (no cue word before it).


def _shift_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _nearest_year(month: int, day: int, ref: date) -> date:
    """``month``/``day`` in the year nearest ``ref`` (its own, before or after)."""
    options = []
    for year in (ref.year - 1, ref.year, ref.year + 1):
        try:
            options.append(date(year, month, day))
        except ValueError:
            continue
    if not options:
        raise ValueError(f"no day {day} in month {month}")
    return min(options, key=lambda d: (abs((d - ref).days), d))


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


def _resolve(kind: str, m: re.Match[str], ref: date) -> tuple[date, str] | None:
    g = [x.lower() if x else x for x in m.groups()]
    if kind == "dmy":
        return date(int(g[2]), MONTHS[g[1]], int(g[0])), "day"
    if kind == "mdy":
        return date(int(g[2]), MONTHS[g[0]], int(g[1])), "day"
    if kind == "iso":
        return date(int(g[0]), int(g[1]), int(g[2])), "day"
    if kind == "my":
        return date(int(g[1]), MONTHS[g[0]], 1), "month"
    if kind in ("dm", "md"):
        day, suffix, of, month = g if kind == "dm" else (g[1], g[2], None, g[0])
        if month == "may" and not (suffix or of):
            return None  # "I may 2x" / "3 may be": the verb, not the month
        return _nearest_year(MONTHS[month], int(day), ref), "day"
    if kind == "day_before_yesterday":
        return ref - timedelta(days=2), "day"
    if kind == "yesterday":
        return ref - timedelta(days=1), "day"
    if kind == "today":
        return ref, "day"
    if kind == "tomorrow":
        return ref + timedelta(days=1), "day"
    if kind in ("ago", "in_n"):
        n, unit = _number(g[0]), g[1]
        sign = -1 if kind == "ago" else 1
        if unit == "day":
            return ref + timedelta(days=sign * n), "day"
        if unit == "week":
            return _monday(ref + timedelta(weeks=sign * n)), "week"
        if unit == "month":
            return _shift_months(ref, sign * n), "month"
        return date(ref.year + sign * n, 1, 1), "year"
    if kind == "rel_weekend":
        saturday = ref + timedelta(days=(5 - ref.weekday()) % 7)
        if g[0] in ("last", "past"):
            saturday = ref - timedelta(days=(ref.weekday() - 5) % 7 or 7)
        elif g[0] == "next":
            saturday = saturday + timedelta(days=7 if ref.weekday() >= 5 else 0)
        return saturday, "day"
    if kind == "rel_unit":
        which, unit = g
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit == "week":
            return _monday(ref + timedelta(weeks=step)), "week"
        if unit == "month":
            return _shift_months(ref, step), "month"
        if unit == "year":
            return date(ref.year + step, 1, 1), "year"
        start = _SEASON_START[unit]
        if step < 0:  # the most recent season of that name that is over
            year = ref.year if start + 3 <= ref.month else ref.year - 1
        elif step > 0:
            year = ref.year if start > ref.month else ref.year + 1
        else:
            year = ref.year
        return date(year, start, 1), "month"
    if kind == "rel_weekday":
        which, day = g[0], WEEKDAYS[g[1]]
        if which == "next":
            ahead = (day - ref.weekday()) % 7 or 7
            return ref + timedelta(days=ahead), "day"
        if which == "this":
            return _monday(ref) + timedelta(days=day), "day"
        back = (ref.weekday() - day) % 7 or 7
        return ref - timedelta(days=back), "day"
    if kind == "rel_month":
        which, month = g[0], MONTHS[g[1]]
        if (
            g[1] == "may"
            and which in ("in", "since", "from", "until")
            and m.end() < len(m.string)
            and m.string[m.end() : m.end() + 4].lower()
            in (" be ", " hav", " go ", " not")
        ):
            return None
        if which == "next":
            year = ref.year + (1 if month <= ref.month else 0)
        elif which == "this":
            year = ref.year
        elif which == "last":
            year = ref.year - (1 if month >= ref.month else 0)
        else:
            year = ref.year - (1 if month > ref.month else 0)
        return date(year, month, 1), "month"
    if kind == "year":
        return date(int(g[0]), 1, 1), "year"
    return None


def resolve_dates(text: str, reference: date | None) -> list[ResolvedDate]:
    """Every date phrase of ``text`` made absolute against ``reference``, in order.

    Absolute dates resolve without a reference; relative ones are skipped without it.
    """
    lowered = text.lower()
    taken: list[tuple[int, int]] = []
    found: list[ResolvedDate] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(lowered):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            if reference is None and kind not in ("dmy", "mdy", "iso", "my", "year"):
                continue
            try:
                resolved = _resolve(kind, m, reference or date.min)
            except (ValueError, OverflowError):
                continue
            if resolved is None:
                continue
            taken.append((m.start(), m.end()))
            found.append(
                ResolvedDate(text[m.start() : m.end()], m.start(), m.end(), *resolved)
            )
    return sorted(found, key=lambda r: r.start)


def annotate(text: str, dates: list[ResolvedDate]) -> str:
    """``text`` with each relative phrase followed by its absolute date in brackets."""
    out, pos = [], 0
    for d in dates:
        out.append(text[pos : d.end])
        if not re.search(r"\d{4}", d.text):  # absolute phrases need no gloss
            out.append(f" ({d.label})")
        pos = d.end
    out.append(text[pos:])
    return "".join(out)
