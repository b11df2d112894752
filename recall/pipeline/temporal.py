"""Resolve the time phrase of a query into a concrete window.

Windows are half-open, ``[start, end)``, in the time zone of the reference time
(UTC when the reference is naive). Weeks start on Monday. Common relative forms
are handled by the rules below; ``dateparser`` is used only to read numeric
dates such as ``5/8/2023``, never to search free text (it finds dates in words
like "may" and "now").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal, cast

Granularity = Literal["day", "week", "month", "year", "range"]

# Open-ended ranges ("before 2020") start here rather than at datetime.min, so
# that time-zone conversions and SQL parameters never overflow.
OPEN_START_YEAR = 1900


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A resolved time window ``[start, end)`` and the phrase it came from."""

    start: datetime
    end: datetime
    granularity: Granularity
    phrase: str


MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6,
    "july": 7, "august": 8, "september": 9, "october": 10, "november": 11,
    "december": 12, "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7,
    "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4,
    "saturday": 5, "sunday": 6,
}  # fmt: skip
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
    "twelve": 12, "a couple of": 2, "a couple": 2, "couple of": 2, "a pair of": 2,
}  # fmt: skip
VAGUE_NUMBERS = {"a few": (2, 4), "few": (2, 4), "several": (3, 7)}

_FULL_MONTH = r"(" + "|".join(n for n in MONTHS if len(n) > 4) + r"|may|june|july)"
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(" + "|".join(WEEKDAYS) + r")"
_NUM = (
    r"(\d{1,3}|a\s+couple\s+of|a\s+couple|couple\s+of|a\s+pair\s+of|a\s+few|few|"
    r"several|" + "|".join(w for w in NUMBER_WORDS if " " not in w) + r")"
)
_UNIT = r"(day|week|month|year)s?"
_ORD = r"(?:st|nd|rd|th)?"

Span = tuple[datetime, datetime, Granularity]


class _Clock:
    """Calendar arithmetic in the reference time zone."""

    def __init__(self, reference_time: datetime) -> None:
        if reference_time.tzinfo is None:
            reference_time = reference_time.replace(tzinfo=UTC)
        self.now = reference_time
        self.tz: tzinfo = reference_time.tzinfo or UTC
        self.today = reference_time.date()

    def at(self, day: date) -> datetime:
        return datetime(day.year, day.month, day.day, tzinfo=self.tz)

    def day(self, day: date) -> Span:
        return self.at(day), self.at(day + timedelta(days=1)), "day"

    def week(self, day: date) -> Span:
        monday = day - timedelta(days=day.weekday())
        return self.at(monday), self.at(monday + timedelta(days=7)), "week"

    def month(self, year: int, month: int) -> Span:
        nxt = (year + 1, 1) if month == 12 else (year, month + 1)
        start = datetime(year, month, 1, tzinfo=self.tz)
        return start, datetime(nxt[0], nxt[1], 1, tzinfo=self.tz), "month"

    def year(self, year: int) -> Span:
        return (
            datetime(year, 1, 1, tzinfo=self.tz),
            datetime(year + 1, 1, 1, tzinfo=self.tz),
            "year",
        )

    def shift_month(self, n: int) -> tuple[int, int]:
        total = self.today.year * 12 + self.today.month - 1 + n
        return total // 12, total % 12 + 1

    def unit_window(self, unit: str, offset: int) -> Span:
        """The calendar ``unit`` that is ``offset`` units from today (may be < 0)."""
        if unit == "day":
            return self.day(self.today + timedelta(days=offset))
        if unit == "week":
            return self.week(self.today + timedelta(weeks=offset))
        if unit == "month":
            return self.month(*self.shift_month(offset))
        return self.year(self.today.year + offset)

    def back(self, unit: str, n: int) -> datetime:
        """The instant ``n`` units before now."""
        if unit in ("day", "week"):
            return self.now - timedelta(days=n * (7 if unit == "week" else 1))
        months = n * (12 if unit == "year" else 1)
        year, month = divmod(self.now.year * 12 + self.now.month - 1 - months, 12)
        day = min(self.now.day, 28)
        return self.now.replace(year=year, month=month + 1, day=day)

    def past_month(self, month: int, *, strict: bool) -> int:
        """Year of the most recent ``month`` (this month counts unless strict)."""
        current = self.today.month
        if month < current or (month == current and not strict):
            return self.today.year
        return self.today.year - 1

    def past_date(self, month: int, day: int) -> date:
        """The most recent ``month``/``day`` on or before today."""
        candidate = date(self.today.year, month, day)
        if candidate > self.today:
            candidate = date(self.today.year - 1, month, day)
        return candidate


def _count(word: str) -> int | tuple[int, int]:
    word = " ".join(word.split())
    if word.isdigit():
        return int(word)
    if word in VAGUE_NUMBERS:
        return VAGUE_NUMBERS[word]
    return NUMBER_WORDS[word]


Handler = Callable[[re.Match[str], _Clock], Span | None]


def _iso(m: re.Match[str], c: _Clock) -> Span:
    return c.day(date(int(m[1]), int(m[2]), int(m[3])))


def _day_month_year(m: re.Match[str], c: _Clock) -> Span:
    return c.day(date(int(m[3]), MONTHS[m[2]], int(m[1])))


def _month_day_year(m: re.Match[str], c: _Clock) -> Span:
    return c.day(date(int(m[3]), MONTHS[m[1]], int(m[2])))


def _month_day(m: re.Match[str], c: _Clock) -> Span:
    return c.day(c.past_date(MONTHS[m[1]], int(m[2])))


def _day_month(m: re.Match[str], c: _Clock) -> Span:
    return c.day(c.past_date(MONTHS[m[2]], int(m[1])))


def _numeric_date(m: re.Match[str], c: _Clock) -> Span | None:
    import dateparser  # slow import, and only needed for this rare form

    naive_now = c.now.replace(tzinfo=None)
    settings = {"DATE_ORDER": "MDY", "RELATIVE_BASE": naive_now}
    parsed = dateparser.parse(m[0], settings=settings)
    return None if parsed is None else c.day(parsed.date())


def _month_year(m: re.Match[str], c: _Clock) -> Span:
    return c.month(int(m[2]), MONTHS[m[1]])


def _relative_month(m: re.Match[str], c: _Clock) -> Span:
    month = MONTHS[m[2]]
    if m[1] == "last":
        return c.month(c.past_month(month, strict=True), month)
    if m[1] == "next":
        year = c.today.year + (1 if month <= c.today.month else 0)
        return c.month(year, month)
    return c.month(c.today.year, month)


def _bare_month(m: re.Match[str], c: _Clock) -> Span:
    month = MONTHS[m[2]]
    return c.month(c.past_month(month, strict=False), month)


def _in_year(m: re.Match[str], c: _Clock) -> Span | None:
    year = int(m[2])
    return c.year(year) if 1000 <= year <= 2999 else None


def _relative_unit(m: re.Match[str], c: _Clock) -> Span:
    which, unit = m[1], m[2]
    if which == "past":
        return c.back(unit, 1), c.now, "range"
    offset = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
    return c.unit_window(unit, offset)


def _ago(m: re.Match[str], c: _Clock) -> Span:
    n, unit = _count(m[1]), m[2]
    if isinstance(n, tuple):
        low, high = n
        return c.unit_window(unit, -high)[0], c.unit_window(unit, -low)[1], "range"
    return c.unit_window(unit, -n)


def _past_n(m: re.Match[str], c: _Clock) -> Span:
    n = _count(m[1])
    amount = n[1] if isinstance(n, tuple) else n
    return c.back(m[2], amount), c.now, "range"


def _named_day(m: re.Match[str], c: _Clock) -> Span:
    phrase = " ".join(m[0].split())
    offsets = {"yesterday": -1, "last night": -1, "tomorrow": 1}
    offset = -2 if phrase.startswith("the day before") else offsets.get(phrase, 0)
    return c.day(c.today + timedelta(days=offset))


def _weekday(m: re.Match[str], c: _Clock) -> Span:
    which, target = m[1], WEEKDAYS[m[2]]
    today = c.today.weekday()
    if which == "this":
        return c.day(c.today + timedelta(days=target - today))
    if which == "next":
        return c.day(c.today + timedelta(days=(target - today - 1) % 7 + 1))
    back = (today - target) % 7
    if which == "last" and back == 0:
        back = 7
    return c.day(c.today - timedelta(days=back))


def _weekend(m: re.Match[str], c: _Clock) -> Span:
    which = " ".join(m[1].lower().split())
    saturday = c.today + timedelta(days=5 - c.today.weekday())
    if which == "last" or (which == "over the" and c.today.weekday() < 5):
        saturday -= timedelta(days=7)
    elif which == "next":
        saturday += timedelta(days=7)
    return c.at(saturday), c.at(saturday + timedelta(days=2)), "range"


_PRE = r"(?:(?:in|on|during|of)\s+)?"
_RULES: tuple[tuple[re.Pattern[str], Handler], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), handler)
    for pattern, handler in (
        (_PRE + r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", _iso),
        (
            _PRE + r"\b(?:the\s+)?(\d{1,2})" + _ORD + r"\s+(?:of\s+)?" + _MONTH
            + r",?\s+(\d{4})\b",
            _day_month_year,
        ),
        (_PRE + r"\b" + _MONTH + r"\s+(\d{1,2})" + _ORD + r",?\s+(\d{4})\b",
         _month_day_year),
        (_PRE + r"\b" + _MONTH + r"\s+(?:the\s+)?(\d{1,2})" + _ORD + r"\b", _month_day),
        (_PRE + r"\b(?:the\s+)?(\d{1,2})" + _ORD + r"\s+(?:of\s+)?" + _MONTH + r"\b",
         _day_month),
        (_PRE + r"\b\d{1,4}[/.]\d{1,2}[/.]\d{2,4}\b", _numeric_date),
        (_PRE + r"\b" + _MONTH + r",?\s+(?:of\s+)?(\d{4})\b", _month_year),
        (r"\b(last|this|next)\s+" + _FULL_MONTH + r"\b", _relative_month),
        (
            r"\b(in|during|throughout|early|mid|late|before|after|since|until|till)"
            r"\s+(?:-\s*)?" + _FULL_MONTH + r"\b",
            _bare_month,
        ),
        (
            r"\b(in|during|throughout|of|before|after|since|until|till|by)\s+(\d{4})\b",
            _in_year,
        ),
        (r"\b(?:the\s+)?(last|this|next|past|previous|coming)\s+(day|week|month|year)\b",
         _relative_unit),
        (r"\b" + _NUM + r"\s+" + _UNIT + r"\s+ago\b", _ago),
        (
            r"\b(?:(?:in|over|during|within)\s+)?the\s+(?:past|last|previous)\s+"
            + _NUM + r"\s+" + _UNIT + r"\b",
            _past_n,
        ),
        (
            r"\b(the\s+day\s+before\s+yesterday|yesterday|last\s+night|today|tonight|"
            r"tomorrow|this\s+(?:morning|afternoon|evening))\b",
            _named_day,
        ),
        (r"\b(last|this|next|on|past)\s+" + _WEEKDAY + r"s?\b", _weekday),
        (r"\b(last|this|next|over\s+the)\s+weekend\b", _weekend),
    )
)  # fmt: skip

_MODIFIER_WORDS = {"before", "after", "since", "until", "till", "by"}
_RELATIVE_MOD = re.compile(
    r"\bthe\s+(day|week|month|year)\s+(before|after)\s+(?:(?:on|in)\s+)?$",
    re.IGNORECASE,
)
_OPEN_MOD = re.compile(
    r"\b(before|prior\s+to|until|till|by|after|since)\s+(?:(?:on|in)\s+)?$",
    re.IGNORECASE,
)
_UNIT_DAYS = {"day": 1, "week": 7}


def _core_start(match: re.Match[str]) -> int:
    # Rules that swallow a leading "before"/"since" report the span after it, so
    # that the modifier logic below sees the word and opens the range.
    first = match.group(0).split(None, 1)[0].lower()
    if first in _MODIFIER_WORDS and match.lastindex:
        return match.start(2)
    return match.start()


def _step(unit: str, at: datetime, forward: bool) -> Span:
    granularity = cast(Granularity, unit)
    if unit in _UNIT_DAYS:
        delta = timedelta(days=_UNIT_DAYS[unit])
        return (
            (at, at + delta, granularity) if forward else (at - delta, at, granularity)
        )
    months = 12 if unit == "year" else 1
    total = at.year * 12 + at.month - 1 + (months if forward else -months)
    moved = at.replace(year=total // 12, month=total % 12 + 1, day=min(at.day, 28))
    return (at, moved, granularity) if forward else (moved, at, granularity)


def resolve_time_window(text: str, *, reference_time: datetime) -> TimeWindow | None:
    """Find the time phrase in ``text`` and resolve it against ``reference_time``.

    The longest matching phrase wins (leftmost on ties). A preceding "before",
    "after", "since" or "until" turns it into an open range bounded by 1900 or
    the reference time; "the week/day/month/year before/after X" gives the unit
    next to X. Returns None when the text has no recognised time phrase.
    """
    clock = _Clock(reference_time)
    # Lowercase without changing any index, so spans map back onto ``text``.
    lowered = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)
    best: tuple[int, int, int, int, Span] | None = None
    for match_order, (pattern, handler) in enumerate(_RULES):
        for match in pattern.finditer(lowered):
            core = _core_start(match)
            key = (-(match.end() - core), core, match_order)
            if best is not None and key >= best[:3]:
                continue
            try:
                span = handler(match, clock)
            except (ValueError, OverflowError, KeyError):
                continue
            if span is not None:
                best = (*key, match.end(), span)
    if best is None:
        return None
    _, core_start, _, core_end, (start, end, granularity) = best
    before = lowered[:core_start]
    phrase_start = core_start
    if relative := _RELATIVE_MOD.search(before):
        forward = relative[2].lower() == "after"
        start, end, granularity = _step(
            relative[1].lower(), end if forward else start, forward
        )
        phrase_start = relative.start()
    elif opened := _OPEN_MOD.search(before):
        word = opened[1].lower()
        if word in ("after", "since"):
            start = start if word == "since" else end
            end = max(clock.now, start)
        else:
            end = end if word in ("until", "till", "by") else start
            start = datetime(OPEN_START_YEAR, 1, 1, tzinfo=clock.tz)
        granularity = "range"
        phrase_start = opened.start()
    phrase = " ".join(text[phrase_start:core_end].split()).rstrip("?.!,")
    return TimeWindow(start=start, end=end, granularity=granularity, phrase=phrase)
