"""Episodes: one extractive digest per session segment (split at time gaps) and scope.

The digest names who took part, when (time span), the entities and keywords that came
up most, and the most informative observations, quoted as written. It is derived from
the segment's observations and messages; when a segment grows, a new episode row
supersedes the old one (same ``segment_start``), so history stays readable.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from memory.consolidation.writer import (
    DerivedRow,
    Scope,
    scope_label,
    scope_of,
    supersede_rows,
    write_rows,
)
from memory.entities import STOP_CAPITALS, find_spans
from memory.models import Memory, Status, Tier

_TOKEN = re.compile(r"[a-z][a-z'-]{3,}")
STOPWORDS = STOP_CAPITALS | frozenset(
    """
    about after again also always because been before being both came come could
    doing done down each even ever every feel felt from going gonna got have
    having into just know like look made make many more most much need never
    only other over really right said same seems some something still such sure
    take than that thats their them then there these they thing things think
    this those though through time told took very want was were what when where
    which while will with would yeah your you're glad love cool awesome amazing
    great good nice wow thanks happy hear
    """.split()  # noqa: SIM905
)


def segments(messages: Sequence[Memory]) -> list[list[Memory]]:
    """Split messages (in ``seq`` order) wherever the time gap exceeds the setting,
    and after every ``MNEMO_EPISODE_MAX_MESSAGES`` messages.

    A left-to-right scan whose state starts afresh at each boundary, so scanning from
    any segment's first message gives the same segments from there on (what lets
    :func:`build_episodes` read only the session's last segment and what followed).
    """
    gap = timedelta(hours=float(getattr(settings, "MNEMO_EPISODE_GAP_HOURS", 4)))
    most = max(1, int(getattr(settings, "MNEMO_EPISODE_MAX_MESSAGES", 200)))
    out: list[list[Memory]] = []
    last: datetime | None = None
    for m in messages:
        if (
            not out
            or len(out[-1]) >= most
            or (m.occurred_at and last and m.occurred_at - last > gap)
        ):
            out.append([])
        out[-1].append(m)
        last = m.occurred_at or last
    return out


def _when(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    day = f"{start.day} {start.strftime('%B %Y')}"
    if end is None or end.date() == start.date():
        return f" on {day}"
    return f" from {day} to {end.day} {end.strftime('%B %Y')}"


def digest(
    messages: Sequence[Memory], observations: Sequence[str]
) -> tuple[str, dict[str, Any]]:
    """The episode text and its metadata (participants, span, entities, keywords)."""
    speakers = list(
        dict.fromkeys(m.speaker or m.role for m in messages if m.speaker or m.role)
    )
    entities: Counter[str] = Counter()
    words: Counter[str] = Counter()
    for m in messages:
        for span in find_spans(m.content, speakers=speakers):
            if span.normalized not in {s.lower() for s in speakers}:
                entities[span.surface] += 1
        words.update(w for w in _TOKEN.findall(m.content.lower()) if w not in STOPWORDS)
    top_entities = [e for e, _ in entities.most_common(8)]
    lowered = {e.lower() for e in top_entities}
    keywords = [w for w, _ in words.most_common(20) if w not in lowered][:10]
    start, end = messages[0].occurred_at, messages[-1].occurred_at
    who = (
        " and ".join(
            [", ".join(speakers[:-1]), speakers[-1]] if len(speakers) > 1 else speakers
        )
        or "Participants"
    )
    head = "Conversation between" if len(speakers) > 1 else "Messages from"
    parts = [f"{head} {who}{_when(start, end)} ({len(messages)} messages)."]
    if top_entities:
        parts.append(f"Mentioned: {', '.join(top_entities)}.")
    if keywords:
        parts.append(f"About: {', '.join(keywords)}.")
    highlights = _highlights(observations)
    if highlights:
        parts.append(
            "Highlights: " + " ".join(h.rstrip(".!") + "." for h in highlights)
        )
    meta = {
        "participants": speakers,
        "entities": top_entities,
        "keywords": keywords,
        "start": start.isoformat() if start else None,
        "end": end.isoformat() if end else None,
    }
    return " ".join(parts), meta


def _highlights(observations: Sequence[str], limit: int = 6) -> list[str]:
    scored = sorted(
        range(len(observations)),
        key=lambda i: (
            -(len(set(observations[i].split())) + 4 * observations[i].count("("))
        ),
    )[:limit]
    return [observations[i][:300] for i in sorted(scored)]


def build_episodes(
    session_id: int, *, after_seq: int | None, now: datetime
) -> list[int]:
    """(Re)write the episodes of segments holding messages with ``seq > after_seq``.

    Reads the session's messages from the first message of its last episode's segment
    on (or all of them on a first run, or when that message is gone): segments before
    it hold no new message. Before, every run read the whole session, so a session of
    n messages cost O(n) a consolidation (docs/benchmarks.md, session 34).
    """
    start = None if after_seq is None else _last_segment_start(session_id, after_seq)
    messages = list(
        Memory.objects.filter(
            session_id=session_id,
            tier=Tier.RAW,
            status=Status.ACTIVE,
            **({"seq__gte": start} if start is not None else {}),
        )
        .only(
            "id",
            "org_id",
            "seq",
            "occurred_at",
            "speaker",
            "role",
            "content",
            "visibility",
            "team_id",
            "owner_user_id",
            "owner_agent_id",
        )
        .order_by("seq", "id")
    )
    touched = [
        s
        for s in segments(messages)
        if after_seq is None or any((m.seq or 0) > after_seq for m in s)
    ]
    if not touched:
        return []
    all_ids = [m.pk for seg in touched for m in seg]
    obs_by_message: dict[int, list[tuple[int, str]]] = {}
    through = Memory.derived_from.through
    for obs_id, msg_id, content in (
        through.objects.filter(
            to_memory_id__in=all_ids,
            from_memory__kind="observation",
            from_memory__status=Status.ACTIVE,
        )
        .values_list("from_memory_id", "to_memory_id", "from_memory__content")
        .order_by("from_memory_id")
    ):
        obs_by_message.setdefault(msg_id, []).append((obs_id, content))
    org_id = messages[0].org_id
    rows: list[DerivedRow] = []
    for seg in touched:
        by_scope: dict[Scope, list[Memory]] = {}
        for m in seg:
            by_scope.setdefault(scope_of(m), []).append(m)
        for scope, msgs in by_scope.items():
            obs = [o for m in msgs for o in obs_by_message.get(m.pk, [])]
            content, meta = digest(msgs, [c for _, c in obs])
            meta |= {
                "segment_start": msgs[0].pk,
                "segment_end": msgs[-1].pk,
                # the segment's first message in any scope (_last_segment_start)
                "segment_first": seg[0].pk,
                "scope": scope_label(scope),
                "derived_by": "rules",
                "covers": [m.pk for m in msgs] + [o for o, _ in obs],
            }
            rows.append(
                DerivedRow(
                    key=f"consolidate:ep:{session_id}:{msgs[0].pk}:{msgs[-1].pk}:"
                    f"{scope_label(scope)}:{len(obs)}",
                    tier=Tier.EPISODIC,
                    kind="episode",
                    content=content,
                    scope=scope,
                    sources=meta["covers"],
                    session_id=session_id,
                    occurred_at=msgs[0].occurred_at,
                    keywords=meta["keywords"],
                    metadata=meta,
                )
            )
    ids = write_rows(org_id, rows, now)
    for row in rows:
        old = (
            Memory.objects.filter(
                session_id=session_id,
                kind="episode",
                status=Status.ACTIVE,
                metadata__segment_start=row.metadata["segment_start"],
                metadata__scope=row.metadata["scope"],
            )
            .exclude(pk=ids[row.key])
            .values_list("id", flat=True)
        )
        supersede_rows(list(old), ids[row.key], now)
    return [ids[r.key] for r in rows]


def _last_segment_start(session_id: int, after_seq: int) -> int | None:
    """The ``seq`` of the first message of the session's last segment with an
    episode, if it is at most ``after_seq`` and still active; else None (read all)."""
    firsts = [
        pk
        for pk in Memory.objects.filter(
            session_id=session_id, kind="episode", status=Status.ACTIVE
        ).values_list("metadata__segment_first", flat=True)
        if isinstance(pk, int)
    ]
    if not firsts:
        return None
    seq = (
        Memory.objects.filter(pk__in=firsts, status=Status.ACTIVE, seq__isnull=False)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return seq if seq is not None and seq <= after_seq else None
