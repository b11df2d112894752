"""A synthetic, deterministic memory corpus for the speed and scale benchmarks.

Pure Python (no Django): the same ``seed`` and ``size`` always give the same orgs,
teams, agents, sessions and rows. Shaped like agent memory rather than noise:

* 50 orgs of Zipf-like sizes (s = 1), so one tenant holds ~22% of the rows and the
  median one ~1%; 2-4 teams and 3 agents per org;
* sessions of 8-60 turns spread over two years, with mixed visibility (60% org, 30%
  team, 10% private to an agent);
* turns of lognormal length (median ~14 words, 3-60) drawn from a Zipf-weighted English
  vocabulary (whole words of the embedding model's own WordPiece vocabulary), built
  around per-org people, projects and places that recur across sessions;
* one episode per session and a few facts and procedures, so every cascade phase has
  rows to read (about 12% of rows are not raw messages).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

N_ORGS = 50


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


START = datetime(2024, 1, 1, tzinfo=UTC)
SPAN_DAYS = 730
FIRST_NAMES = _words(
    "Alice Bruno Chen Dana Elif Farah Goran Hana Ivan Jonas Kavya Liam Maya Nadia "
    "Omar Priya Quentin Rosa Sven Tariq Uma Viktor Wen Xavier Yara Zoe Amara Bilal "
    "Carmen Dmitri Esme Felix Greta Hugo Ines Jamal Keiko Lars Mina Noor"
)
PROJECTS = _words(
    "Atlas Beacon Cobalt Delta Ember Falcon Granite Harbor Iris Juniper Kestrel Lumen "
    "Meridian Nimbus Orion Pioneer Quartz Raven Sierra Tundra"
)
PLACES = _words(
    "Lisbon Berlin Nairobi Osaka Denver Toronto Madrid Seoul Dublin Austin Oslo Lima "
    "Cairo Prague Sydney"
)
OPENERS = (
    "I think",
    "Yesterday",
    "Last week",
    "Honestly",
    "By the way",
    "So",
    "Just to confirm",
    "Quick update:",
    "As discussed,",
    "Remember that",
    "FYI",
    "Good news:",
)
TEMPLATES = (
    "{opener} {person} said the {w} {w} for {project} is {w} again.",
    "{opener} we moved the {w} review with {person} to {day}.",
    "{person} asked whether {project} needs a {w} {w} before the {w} launch.",
    "{opener} the {w} in {place} was {w}, and {person} wants a {w} {w} plan.",
    "Can you remind me what {person} decided about the {w} {w}?",
    "{opener} {project} shipped the {w} fix; {person} is still {w} about the {w}.",
    "{person} prefers {w} {w} over {w} when working on {project}.",
    "We met {person} in {place} to talk about {w}, {w} and the {project} budget.",
)
FACT_TEMPLATES = (
    "{person} leads the {w} work on {project}.",
    "{person} lives in {place}.",
    "{project} depends on the {w} {w} service.",
    "{person} prefers {w} {w} in the morning.",
)
PROCEDURE_TEMPLATES = (
    "To release {project}: run the {w} checks, ask {person} for a {w} review.",
    "When {w} alerts fire in {place}, page {person} and pause the {w} jobs.",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "tomorrow")


@dataclass(frozen=True)
class OrgSpec:
    index: int
    slug: str
    n_rows: int
    n_teams: int
    people: tuple[str, ...]
    projects: tuple[str, ...]
    places: tuple[str, ...]


@dataclass
class Row:
    """One memory row as the loader writes it (ids are assigned by the loader)."""

    org: int
    session: int  # index of the session within the whole corpus
    seq: int | None
    tier: str
    kind: str
    content: str
    speaker: str
    occurred_at: datetime
    visibility: str
    team: int | None  # team index within the org
    agent: int  # agent index within the org (owner of private rows, author of all)
    entities: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SessionSpec:
    index: int
    org: int
    started_at: datetime
    visibility: str
    team: int | None
    agent: int


def load_vocabulary(vocab_txt: Path, *, size: int = 6000) -> list[str]:
    """Whole English words of a WordPiece vocabulary, roughly by frequency rank."""
    words = []
    for line in vocab_txt.read_text().splitlines():
        w = line.strip()
        if w.isascii() and w.isalpha() and w.islower() and 3 <= len(w) <= 14:
            words.append(w)
    return words[:size]


def org_sizes(total: int, n_orgs: int = N_ORGS) -> list[int]:
    """Zipf-like (s = 1) split of ``total`` rows over ``n_orgs`` orgs, largest first."""
    weights = [1.0 / (i + 1) for i in range(n_orgs)]
    scale = total / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[0] += total - sum(sizes)
    return sizes


def small_and_large_org(total: int, n_orgs: int = N_ORGS) -> tuple[int, int]:
    """Indexes of the org nearest 1% of the rows (small tenant) and the largest one."""
    sizes = org_sizes(total, n_orgs)
    small = min(range(n_orgs), key=lambda i: abs(sizes[i] - total * 0.01))
    return small, 0


class CorpusGenerator:
    """Deterministic rows for ``size`` memories; iterate with :meth:`rows`."""

    def __init__(self, size: int, vocabulary: list[str], *, seed: int = 42) -> None:
        self.size = size
        self.seed = seed
        self.vocabulary = vocabulary
        rng = random.Random(seed)
        # Zipf weights over the vocabulary: a few words are common, most are rare.
        self._cum = []
        acc = 0.0
        for rank in range(len(vocabulary)):
            acc += 1.0 / (rank + 10)
            self._cum.append(acc)
        self.orgs = [self._org(i, n, rng) for i, n in enumerate(org_sizes(size))]
        self.sessions: list[SessionSpec] = []

    def _org(self, index: int, n_rows: int, rng: random.Random) -> OrgSpec:
        return OrgSpec(
            index=index,
            slug=f"bench-{index:02d}",
            n_rows=n_rows,
            n_teams=rng.randint(2, 4),
            people=tuple(rng.sample(FIRST_NAMES, 12)),
            projects=tuple(rng.sample(PROJECTS, 6)),
            places=tuple(rng.sample(PLACES, 5)),
        )

    def _word(self, rng: random.Random) -> str:
        x = rng.random() * self._cum[-1]
        lo, hi = 0, len(self._cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._cum[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return self.vocabulary[lo]

    def _fill(
        self, template: str, org: OrgSpec, rng: random.Random
    ) -> tuple[str, tuple[str, ...]]:
        person = rng.choice(org.people[:4] if rng.random() < 0.5 else org.people)
        project = rng.choice(org.projects)
        place = rng.choice(org.places)
        text = template.format(
            opener=rng.choice(OPENERS),
            person=person,
            project=project,
            place=place,
            day=rng.choice(DAYS),
            w="{w}",
        )
        while "{w}" in text:
            text = text.replace("{w}", self._word(rng), 1)
        ents = tuple(e for e in (person, project, place) if e in text)
        return text, ents

    def _message(self, org: OrgSpec, rng: random.Random) -> tuple[str, tuple[str, ...]]:
        """A turn of lognormal length: a templated sentence, then free words."""
        target = min(60, max(3, int(rng.lognormvariate(2.65, 0.55))))
        text, ents = self._fill(rng.choice(TEMPLATES), org, rng)
        words = text.split()
        while len(words) < target:
            clause = [self._word(rng) for _ in range(rng.randint(3, 9))]
            words += ["and", *clause] if rng.random() < 0.5 else clause
        words = words[:target]
        out = " ".join(words)
        return (out if out.endswith((".", "?", "!")) else out + "."), ents

    def rows(self) -> Iterator[Row]:
        """All rows, org by org, session by session (deterministic)."""
        session_index = 0
        for org in self.orgs:
            rng = random.Random(f"{self.seed}:{org.index}")
            left = org.n_rows
            while left > 0:
                n = min(left, rng.randint(8, 60))
                r = rng.random()
                vis = "org" if r < 0.6 else "team" if r < 0.9 else "private"
                team = rng.randrange(org.n_teams) if vis == "team" else None
                spec = SessionSpec(
                    index=session_index,
                    org=org.index,
                    started_at=START
                    + timedelta(minutes=rng.randrange(SPAN_DAYS * 24 * 60)),
                    visibility=vis,
                    team=team,
                    agent=rng.randrange(3),
                )
                self.sessions.append(spec)
                yield from self._session_rows(org, spec, n, rng)
                left -= n
                session_index += 1

    def _session_rows(
        self, org: OrgSpec, spec: SessionSpec, n: int, rng: random.Random
    ) -> Iterator[Row]:
        """``n`` rows of one session: messages, then an episode, facts, procedures."""
        speakers = rng.sample(org.people, 2)
        at = spec.started_at
        derived = max(0, round(n * 0.12))
        seq = 0
        for i in range(n):
            at += timedelta(seconds=rng.randint(20, 600))
            speaker, number = "", None
            if i < n - derived:
                tier, kind = "raw", "message"
                text, ents = self._message(org, rng)
                speaker, number = speakers[seq % 2], seq
                seq += 1
            elif i == n - derived:
                tier, kind = "episodic", "episode"
                pair = " ".join(rng.choice(TEMPLATES) for _ in range(2))
                text, ents = self._fill(pair, org, rng)
                text = f"Episode: {text}"
            elif rng.random() < 0.8:
                tier, kind = "semantic", "fact"
                text, ents = self._fill(rng.choice(FACT_TEMPLATES), org, rng)
            else:
                tier, kind = "procedural", "procedure"
                text, ents = self._fill(rng.choice(PROCEDURE_TEMPLATES), org, rng)
            yield Row(
                org=org.index,
                session=spec.index,
                seq=number,
                tier=tier,
                kind=kind,
                content=text,
                speaker=speaker,
                occurred_at=at,
                visibility=spec.visibility,
                team=spec.team,
                agent=spec.agent,
                entities=ents,
            )


def sample_queries(
    rows: list[Row], orgs: list[OrgSpec], n: int, *, seed: int = 7
) -> list[tuple[int, str]]:
    """``n`` (org index, question) pairs from the corpus's own entities and words."""
    rng = random.Random(seed)
    raw = [r for r in rows if r.kind == "message" and r.entities]
    out = []
    forms = (
        "what did {e} say about the {a} {b}?",
        "when did we discuss {a} with {e}?",
        "{e} {a} {b}",
        "what is the status of {a} for {e}?",
        "who mentioned {a} and {b}?",
    )
    for _ in range(n):
        row = rng.choice(raw)
        words = [w.strip(".,?!:;") for w in row.content.split() if len(w) > 4]
        a, b = rng.sample(words, 2) if len(words) >= 2 else ("plan", "update")
        out.append(
            (row.org, rng.choice(forms).format(e=rng.choice(row.entities), a=a, b=b))
        )
    return out
