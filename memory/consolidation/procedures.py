"""Procedures, rules and lessons: how-to, imperative and "I learned" statements (rules).

``procedure``: steps or a how-to ("To reset the VPN, open settings and ...", "First ...,
then ..."); ``rule``: a standing instruction ("Always run migrations before deploy",
"Never push to main", "Make sure you ..."); ``lesson``: something learned ("I learned
that ...", "Lesson: ...", "Next time, ...").
"""

from __future__ import annotations

import re

from memory.consolidation.types import ObservationDraft, ProcedureDraft

_IMPERATIVE_VERBS = (
    "add|avoid|book|bring|call|click|configure|copy|create|delete|deploy|do|don't|"
    "download|enable|disable|ensure|install|keep|open|pin|press|put|remember|remove|"
    "restart|run|save|send|set|start|stop|try|turn|update|upload|use|wait|write"
)
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "rule",
        re.compile(
            r"^(?:\w+:\s+)?(?:(?:always|never)\s+(?!here\b|there\b|been\b|be\b|so\b|"
            r"too\b|a\b|the\b|gonna\b|ever\b)[a-z]+|make sure|be sure to|don't ever|"
            r"do not ever|you must|you should always|you should never)\b",
            re.I,
        ),
    ),
    (
        "rule",
        re.compile(r"\b(?:the rule is|rule of thumb|as a rule|policy is)\b", re.I),
    ),
    (
        "lesson",
        re.compile(
            r"\b(?:learned|learnt|realized|realised|the lesson|"
            r"lesson learned|the takeaway|next time,?)\b",
            re.I,
        ),
    ),
    (
        "procedure",
        re.compile(
            r"^(?:\w+:\s+)?(?:to|in order to)\s+[a-z][\w\s'-]{2,60},\s*"
            rf"(?:you\s+(?:need|have|should)\s+to\s+|just\s+)?"
            rf"(?:{_IMPERATIVE_VERBS})\b",
            re.I,
        ),
    ),
    (
        "procedure",
        re.compile(
            r"\b(?:step\s+\d|first,?\s.+\bthen\b|the trick is|here's how to|"
            r"here is how to|the best way to \w+ is)\b",
            re.I,
        ),
    ),
    (
        "rule",
        re.compile(
            rf"^(?:\w+:\s+)?(?:please\s+)?(?:{_IMPERATIVE_VERBS})\s+"
            r"(?!it out|this out|out\b|it up|up\b|this pic|that pic|the pic)"
            r"(?:the|a|an|your|all|every|it|them|this|that)\b[^!]{12,}[.]?$",
            re.I,
        ),
    ),
)


def procedure_kind(sentence: str) -> str | None:
    """``procedure``, ``rule`` or ``lesson`` when the sentence matches a pattern."""
    for kind, pattern in PATTERNS:
        if pattern.search(sentence):
            return kind
    return None


def extract_procedures(obs: ObservationDraft, original: str) -> list[ProcedureDraft]:
    """At most one procedural row per observation; ``original`` is the quoted sentence.

    Lessons keep the attributed text (who learned it matters); rules and how-tos keep
    the speaker's own imperative wording, which reads as an instruction.
    """
    for kind, pattern in PATTERNS:
        if pattern.search(original) or (
            kind == "lesson" and pattern.search(obs.content)
        ):
            content = obs.content if kind == "lesson" else original.strip()
            if len(content.split()) < 4 or content.endswith("?"):
                return []
            return [ProcedureDraft(obs.message_id, obs.index, kind, content)]
    return []
