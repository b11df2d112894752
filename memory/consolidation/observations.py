"""Observations: the salient statements of a message, attributed and date-resolved.

Pure functions. A message is split into sentences (offsets kept, for ``source_span``);
questions, pleasantries and fragments are dropped; first-person words are rewritten to
the speaker ("I went" -> "Caroline went", "my kids" -> "Caroline's kids") so that the
statement stands on its own; relative dates get their absolute date in brackets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory.consolidation.dates import annotate, resolve_dates
from memory.consolidation.facts import RULES
from memory.consolidation.procedures import procedure_kind
from memory.consolidation.types import MessageView, ObservationDraft
from memory.entities import STOP_CAPITALS

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\n+")
# A full stop after one of these, or after a single letter ("J. K. Rowling", "5 p.m.",
# "e.g."), does not end a sentence ("Dr. Smith", "St. Louis"). Words that also end
# sentences ("no", "sun", "sat", "wed") are not listed: "I said no." ends one.
_ABBREVIATIONS = frozenset(
    {
        *("dr", "mr", "mrs", "ms", "mx", "prof", "st", "mt", "ft", "jr", "sr"),
        *("sen", "rep", "gov", "gen", "col", "capt", "lt", "sgt", "rev", "fr"),
        *("vs", "etc", "inc", "ltd", "corp", "dept", "univ", "approx"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct"),
        *("nov", "dec", "mon", "tue", "tues", "thu", "thur", "thurs", "fri"),
    }
)
_LAST_WORD = re.compile(r"([A-Za-z]+)\.$")
_WORD = re.compile(r"[A-Za-z0-9'’]+")
_FIRST_PERSON = re.compile(
    r"\b(I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|my|me|we|our|us)\b"
)
_CAPITAL = re.compile(r"\b[A-Z][a-z]+")
FILLER_STARTS = (
    "wow",
    "thanks",
    "thank you",
    "that's",
    "that’s",
    "that is",
    "so cool",
    "awesome",
    "great",
    "haha",
    "lol",
    "omg",
    "aww",
    "oh",
    "yeah",
    "yes",
    "no problem",
    "sounds",
    "hey",
    "hi",
    "hello",
    "congrats",
    "congratulations",
    "good to",
    "nice",
    "cool",
    "sure",
    "bye",
    "take care",
    "glad",
    "love that",
    "i agree",
    "same here",
    "you too",
    "you're",
    "you’re",
    "me too",
    "totally",
)
# "I" as a Roman numeral ("World War I", "a German Tiger I tank", "Type I diabetes"):
# after these words it is not the speaker, and "Tiger user tank" loses the name. (Not
# after regnal names: "I told Peter I would come" is far more common than "Peter I".)
_NUMERAL_WORDS = (
    "War",
    "Tiger",
    "Phase",
    "Part",
    "Chapter",
    "Type",
    "Title",
    "Class",
    "Grade",
    "Level",
    "Stage",
    "Book",
    "Volume",
    "Act",
    "Season",
    "Series",
    "Gen",
    "Generation",
    "Version",
)
_NUMERAL_I = re.compile(rf"\b((?:{'|'.join(_NUMERAL_WORDS)}) )I\b")
_KEPT_I = "\x00"  # stands for a numeral "I" while the pronouns are rewritten
_PRONOUNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bI(?:'m|’m| am)\b"), "{s} is"),
    (re.compile(r"\bI(?:'ve|’ve| have)\b"), "{s} has"),
    (re.compile(r"\bI(?:'d|’d)\b"), "{s} would"),
    (re.compile(r"\bI(?:'ll|’ll)\b"), "{s} will"),
    (re.compile(r"\bI do not\b|\bI don't\b|\bI don’t\b"), "{s} does not"),
    (re.compile(r"\bI do\b"), "{s} does"),
    (re.compile(r"\bI\b"), "{s}"),
    (re.compile(r"\b[Mm]y\b"), "{s}'s"),
    (re.compile(r"\bmine\b"), "{s}'s"),
    (re.compile(r"\bmyself\b"), "{s}"),
    (re.compile(r"\bme\b"), "{s}"),
]


def split_sentences(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) offsets of each sentence of ``text``, whitespace trimmed."""
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        if not m.group(0).startswith("\n") and not _ends_sentence(text, m):
            continue
        yield from _trimmed(text, pos, m.start() + len(m.group(0).rstrip()))
        pos = m.end()
    yield from _trimmed(text, pos, len(text))


def _ends_sentence(text: str, m: re.Match[str]) -> bool:
    """Whether the punctuation before ``m`` ends a sentence (see _ABBREVIATIONS)."""
    if text[m.start() - 1] != ".":
        return True
    word = _LAST_WORD.search(text, max(0, m.start() - 12), m.start())
    if word is None:
        return True
    token = word.group(1)
    return not (token.lower() in _ABBREVIATIONS or (len(token) == 1 and token != "I"))


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    chunk = text[start:end]
    stripped = chunk.strip()
    if stripped:
        lead = len(chunk) - len(chunk.lstrip())
        yield start + lead, start + lead + len(stripped)


def salience(sentence: str, has_date: bool) -> int:
    """A small score: statements about the speaker, names, dates and numbers count."""
    words = _WORD.findall(sentence)
    if len(words) < 3 or sentence.rstrip().endswith("?"):
        return 0
    score = 0
    first_person = bool(_FIRST_PERSON.search(sentence))
    score += 2 if first_person else 0
    score += 2 if has_date else 0
    names = [w for w in _CAPITAL.findall(sentence) if w.lower() not in STOP_CAPITALS]
    score += min(2, len(names))
    score += 1 if any(w.isdigit() for w in words) else 0
    score += 1 if len(words) >= 8 else 0
    score += 3 if procedure_kind(sentence) else 0
    if names and any(rule.pattern.search(sentence) for rule in RULES):
        score += 2  # "Caroline doesn't like hiking": a fact about someone named
    lowered = sentence.lower().lstrip("\"'(")
    if lowered.startswith(FILLER_STARTS) and not first_person:
        score -= 3
    return score


PRESENT_VERBS = frozenset(
    """
    live work love like enjoy hate want need think feel know make take play study own
    adore prefer teach run write read paint cook volunteer plan hope believe miss keep
    use visit go do try get collect practice attend care remember mean wish spend
    """.split()  # noqa: SIM905
)
_I_VERB = re.compile(
    r"\bI\s+((?:also|really|still|usually|often|now|just)\s+)?([a-z]+)\b"
)


def _third_person(verb: str) -> str:
    if verb in ("go", "do"):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x")):
        return verb + "es"
    return verb + "s"


def _agree(match: re.Match[str]) -> str:
    adverb, verb = match.group(1) or "", match.group(2)
    if verb in PRESENT_VERBS:
        verb = _third_person(verb)
    return f"I {adverb}{verb}"


def attribute(sentence: str, speaker: str) -> str:
    """Rewrite first-person words to ``speaker``; prefix the speaker if unnamed."""
    if not speaker:
        return sentence
    out = _NUMERAL_I.sub(rf"\1{_KEPT_I}", sentence)
    out = _I_VERB.sub(_agree, out)
    for pattern, template in _PRONOUNS:
        out = pattern.sub(template.format(s=speaker), out)
    out = out.replace(_KEPT_I, "I")
    if speaker.lower() not in out.lower():
        out = f"{speaker}: {out}"
    return out


def observe(message: MessageView, *, min_salience: int = 2) -> list[ObservationDraft]:
    """The observations of one message, in order (``index`` counts per message)."""
    ref = message.occurred_at.date() if message.occurred_at else None
    speaker = message.speaker or (message.role if message.role != "user" else "")
    speaker = speaker or "The user"
    drafts: list[ObservationDraft] = []
    for start, end in split_sentences(message.content):
        sentence = message.content[start:end]
        dates = resolve_dates(sentence, ref)
        if salience(sentence, bool(dates)) < min_salience:
            continue
        content = attribute(annotate(sentence, dates), speaker)
        drafts.append(
            ObservationDraft(
                message_id=message.id,
                index=len(drafts),
                content=content,
                quote_start=start,
                quote_end=end,
                speaker=speaker,
                dates=tuple(dates),
            )
        )
    return drafts
