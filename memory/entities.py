"""Rule-based entity pass: known entity names and capitalised spans -> Entity + Mention.

No model service is needed. Types are guessed by simple rules (speakers are people,
a span after "in/at/from/to" is a place, months and weekdays are dates, else a thing);
issue-level NER can replace this without changing the stored shape.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection

from config.db.arrays import IntArray, TextArray
from memory.models import Entity, EntityType, Memory

_WORD = r"[A-Z][\w'’\-]*[\w]"
_SPAN = re.compile(rf"\b{_WORD}(?:\s+(?:of\s+|de\s+|van\s+|von\s+|the\s+)?{_WORD})*")
_POSSESSIVE = re.compile(r"['’]s$")
_TOKEN = re.compile(r"[a-z][a-z0-9'’\-]+")

STOP_CAPITALS = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "im",
        "a",
        "an",
        "the",
        "and",
        "but",
        "or",
        "so",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "there",
        "here",
        "what",
        "when",
        "where",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "which",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "might",
        "must",
        "shall",
        "it",
        "its",
        "it's",
        "he",
        "she",
        "they",
        "we",
        "you",
        "me",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "them",
        "us",
        "oh",
        "ok",
        "okay",
        "yes",
        "no",
        "not",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "wow",
        "well",
        "also",
        "just",
        "really",
        "very",
        "great",
        "good",
        "nice",
        "sure",
        "sounds",
        "yeah",
        "yep",
        "awesome",
        "congrats",
        "congratulations",
        "absolutely",
        "definitely",
        "totally",
        "by",
        "the",
        "way",
        "anyway",
        "maybe",
        "let",
        "let's",
        "on",
        "in",
        "at",
        "to",
        "from",
        "for",
        "with",
        "about",
        "as",
        "of",
        "after",
        "before",
        "during",
        "since",
        "until",
        "today",
        "tomorrow",
        "yesterday",
        "tonight",
        "last",
        "next",
        "this",
    ]
)
MONTHS = frozenset(
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
    ]
)
WEEKDAYS = frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
)
PLACE_CUES = frozenset({"in", "at", "from", "to", "near", "visited", "visit"})


@dataclass(frozen=True)
class Span:
    surface: str
    normalized: str
    start: int
    end: int
    type: str


def normalize_name(name: str) -> str:
    name = _POSSESSIVE.sub("", name.strip().strip(".,!?;:\"'()[]"))
    return re.sub(r"\s+", " ", name).lower()


MAX_NAME_WORDS = 6
MAX_NAME_CHARS = 120


def find_spans(text: str, *, speakers: Iterable[str] = ()) -> list[Span]:
    """Capitalised spans in ``text`` that look like names (initial filler dropped)."""
    people = {normalize_name(s) for s in speakers if s}
    spans: list[Span] = []
    for match in _SPAN.finditer(text):
        surface = _POSSESSIVE.sub("", match.group(0))
        words = surface.split()
        while words and words[0].lower().strip("'’") in STOP_CAPITALS:
            words = words[1:]
        if not words or len(words) > MAX_NAME_WORDS:
            # A run of many capitalised words is a title or a shouted line, not a name.
            continue
        surface = " ".join(words)
        if len(surface) > MAX_NAME_CHARS:
            continue
        start = match.start() + match.group(0).find(words[0])
        norm = normalize_name(surface)
        if len(norm) < 2 or norm in STOP_CAPITALS:
            continue
        possessive = _POSSESSIVE.search(match.group(0)) is not None
        if (
            len(words) == 1
            and not possessive
            and norm not in people
            and _sentence_initial(text, start)
        ):
            # "Want to pair?" / "Remind me": a capital at a sentence start says nothing.
            continue
        spans.append(
            Span(
                surface,
                norm,
                start,
                start + len(surface),
                _guess_type(text, start, norm, people),
            )
        )
    return spans


def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?\n\"'(:"


def _guess_type(text: str, start: int, norm: str, people: set[str]) -> str:
    if norm in people:
        return EntityType.PERSON
    first = norm.split()[0]
    if first in MONTHS or first in WEEKDAYS:
        return EntityType.DATE
    before = text[:start].split()[-1:] or [""]
    if before[0].lower() in PLACE_CUES:
        return EntityType.PLACE
    return EntityType.THING


# What linking reads of an entity: not its name's embedding (384 floats parsed per row).
_LINK_FIELDS = ("id", "org_id", "normalized_name", "aliases")


def extract_and_link(
    *, ids: Sequence[int] = (), rows: Sequence[Memory] | None = None
) -> int:
    """Create entities and mentions for memories ``ids`` (or for ``rows`` already
    loaded with their ``org_id``, ``content`` and ``speaker``); returns mentions
    written."""
    if rows is None:
        rows = list(
            Memory.objects.filter(pk__in=ids).only("id", "org_id", "content", "speaker")
        )
    if not rows:
        return 0
    per_memory: dict[int, list[Span]] = {}
    wanted: dict[tuple[int, str], Span] = {}
    for m in rows:
        spans = find_spans(m.content, speakers=[m.speaker])
        if m.speaker and len(m.speaker) <= MAX_NAME_CHARS:
            norm = normalize_name(m.speaker)
            spans.append(Span(m.speaker, norm, -1, -1, EntityType.PERSON))
        per_memory[m.pk] = spans
        for s in spans:
            wanted.setdefault((m.org_id, s.normalized), s)
    # Known names written in lower case ("went to paris") are linked too.
    org_ids = {m.org_id for m in rows}
    tokens = {t for m in rows for t in _TOKEN.findall(m.content.lower())}
    known = {}
    if tokens:
        for e in Entity.objects.filter(
            org_id__in=org_ids, normalized_name__in=tokens, merged_into__isnull=True
        ).only(*_LINK_FIELDS):
            known[(e.org_id, e.normalized_name)] = e
    # Names merged into another entity (aliases) link to that entity, not a new one.
    for e in Entity.objects.filter(
        org_id__in=org_ids,
        aliases__overlap=[n for _, n in wanted],
        merged_into__isnull=True,
    ).only(*_LINK_FIELDS):
        for alias in e.aliases:
            if (e.org_id, alias) in wanted and (e.org_id, alias) not in known:
                known[(e.org_id, alias)] = e
                del wanted[(e.org_id, alias)]
    Entity.objects.bulk_create(
        [
            Entity(org_id=org, name=s.surface, normalized_name=norm, type=s.type)
            for (org, norm), s in wanted.items()
        ],
        ignore_conflicts=True,
    )
    entities = {
        (e.org_id, e.normalized_name): e
        for e in Entity.objects.filter(
            org_id__in=org_ids,
            normalized_name__in={n for _, n in wanted},
            merged_into__isnull=True,
        ).only(*_LINK_FIELDS)
    }
    entities.update(known)
    # (org, memory, entity, surface, start, end) of each mention found.
    mentions: list[tuple[int, int, int, str, int | None, int | None]] = []
    for m in rows:
        spans = per_memory[m.pk]
        linked = {s.normalized for s in spans}
        for s in spans:
            found = entities.get((m.org_id, s.normalized))
            if found is not None:
                mentions.append(
                    (
                        m.org_id,
                        m.pk,
                        found.pk,
                        s.surface[:200],
                        s.start if s.start >= 0 else None,
                        s.end if s.end >= 0 else None,
                    )
                )
        lowered = m.content.lower()
        for (org, norm), e in known.items():
            if org != m.org_id or norm in linked:
                continue
            pos = re.search(rf"\b{re.escape(norm)}\b", lowered)
            if pos is not None:
                mentions.append((m.org_id, m.pk, e.pk, norm, pos.start(), pos.end()))
    return _store_mentions(mentions)


def _store_mentions(
    mentions: list[tuple[int, int, int, str, int | None, int | None]],
) -> int:
    """Insert ``mentions`` (a span already stored is skipped) and add those written to
    their entities' ``mention_count``; returns mentions written.

    Two statements over arrays instead of the ORM's ``bulk_create`` and an ``UPDATE
    ... CASE`` with one ``WHEN`` an entity: Django resolved and compiled every
    ``WHEN``, a quarter of a worker's linking CPU (docs/benchmarks.md, session 34).
    Only mentions actually inserted are counted (the ORM counted skipped ones too).
    """
    if not mentions:
        return 0
    orgs, memories, entity_ids, surfaces, starts, ends = zip(*mentions, strict=True)
    with connection.cursor() as c:
        c.execute(
            """
            INSERT INTO memory_mention
                (org_id, memory_id, entity_id, surface, start, "end")
            SELECT * FROM unnest(
                %s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::int[],
                %s::int[]
            )
            ON CONFLICT DO NOTHING
            RETURNING entity_id
            """,
            [
                IntArray(orgs),
                IntArray(memories),
                IntArray(entity_ids),
                TextArray(surfaces),
                list(starts),  # may hold None: psycopg's list dumper
                list(ends),
            ],
        )
        written = [entity_id for (entity_id,) in c.fetchall()]
        counts = Counter(written)
        if counts:
            c.execute(
                """
                UPDATE memory_entity AS e
                SET mention_count = e.mention_count + v.n
                FROM unnest(%s::bigint[], %s::int[]) AS v(id, n)
                WHERE e.id = v.id
                """,
                [IntArray(counts), IntArray(counts.values())],
            )
    return len(written)


def entities_for_names(
    org_id: int, names: Iterable[tuple[str, str]]
) -> dict[str, Entity]:
    """Get or create the entities named ``(surface, type)``; keyed by normalised name.

    Alias-aware: a name merged into another entity resolves to that entity. A new
    entity of a specific type upgrades an existing ``thing`` of the same name.
    """
    wanted: dict[str, tuple[str, str]] = {}
    for surface, type_ in names:
        norm = normalize_name(surface)
        if norm and (norm not in wanted or wanted[norm][1] == EntityType.THING):
            wanted[norm] = (surface, type_)
    if not wanted:
        return {}
    found: dict[str, Entity] = {}
    active = Entity.objects.filter(org_id=org_id, merged_into__isnull=True)
    for e in active.filter(aliases__overlap=list(wanted)):
        for alias in e.aliases:
            if alias in wanted:
                found[alias] = e
    missing = [n for n in wanted if n not in found]
    Entity.objects.bulk_create(
        [
            Entity(
                org_id=org_id,
                name=wanted[n][0][:200],
                normalized_name=n[:200],
                type=wanted[n][1],
            )
            for n in missing
        ],
        ignore_conflicts=True,
    )
    upgrade: list[Entity] = []
    for e in active.filter(normalized_name__in=missing):
        found[e.normalized_name] = e
        if (
            e.type == EntityType.THING
            and wanted[e.normalized_name][1] != EntityType.THING
        ):
            e.type = wanted[e.normalized_name][1]
            upgrade.append(e)
    if upgrade:
        Entity.objects.bulk_update(upgrade, ["type"])
    return found
