"""Optional LLM extractor: an OpenAI-compatible chat completions API with JSON output.

Configured by ``LLM_BASE_URL``, ``LLM_MODEL``, ``LLM_API_KEY`` (settings or
environment), ``MNEMO_LLM_TIMEOUT_SECONDS``, ``MNEMO_LLM_MAX_RETRIES`` and
``MNEMO_LLM_BATCH_MESSAGES``.
Only the standard library is used (``urllib``). Each batch of messages is one request
asking for a JSON object that follows :data:`RESPONSE_SCHEMA`; quotes are located in the
message text to rebuild exact ``source_span`` offsets (a quote that is not in the
message is dropped, so the model can never invent a citation). Any failure of a
batch falls back to :class:`RuleExtractor` for that batch and is recorded as an error.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import date
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory.consolidation.dates import resolve_dates
from memory.consolidation.extractors import RuleExtractor
from memory.consolidation.facts import FUNCTIONAL, extract_facts
from memory.consolidation.observations import attribute
from memory.consolidation.types import (
    Extraction,
    FactDraft,
    MessageView,
    ObservationDraft,
    ProcedureDraft,
)

RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["observations"],
    "properties": {
        "observations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["message_id", "quote", "statement"],
                "properties": {
                    "message_id": {"type": "integer"},
                    "quote": {"type": "string"},
                    "statement": {"type": "string"},
                    "facts": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["subject", "predicate", "object"],
                            "properties": {
                                "subject": {"type": "string"},
                                "predicate": {"type": "string"},
                                "object": {"type": "string"},
                                "negated": {"type": "boolean"},
                                "valid_from": {"type": "string"},
                                "valid_to": {"type": "string"},
                            },
                        },
                    },
                    "procedure": {
                        "type": "string",
                        "enum": ["", "procedure", "rule", "lesson"],
                    },
                },
            },
        }
    },
}
PROMPT = (
    "Extract long-term memory from these chat messages. For each salient statement "
    "give "
    "the message_id, the exact quote (copied verbatim from the message), a standalone "
    "statement naming the speaker instead of I/my and with relative dates made "
    "absolute "
    "using the message time, its facts as subject/predicate/object (predicates in "
    "snake_case, e.g. lives_in, works_at, likes, visited; ISO dates for valid_from/"
    "valid_to when stated), and 'procedure', 'rule' or 'lesson' if it is one. "
    "Answer with one JSON object only."
)


class LLMError(Exception):
    """The LLM call failed or returned something unusable."""


def _setting(name: str, default: Any = None) -> Any:
    return getattr(settings, name, None) or os.environ.get(name) or default


def llm_configured() -> bool:
    return bool(_setting("LLM_BASE_URL") and _setting("LLM_MODEL"))


class LLMExtractor:
    """Batches of messages -> one chat completion each; rules for any failed batch."""

    name = "llm"

    def __init__(self, *, org_id: int | None = None) -> None:
        self.org_id = org_id
        self.base_url = str(_setting("LLM_BASE_URL", "")).rstrip("/")
        self.model = str(_setting("LLM_MODEL", ""))
        self.api_key = str(_setting("LLM_API_KEY", ""))
        self.timeout = float(_setting("MNEMO_LLM_TIMEOUT_SECONDS", 30))
        self.retries = int(_setting("MNEMO_LLM_MAX_RETRIES", 2))
        self.batch = int(_setting("MNEMO_LLM_BATCH_MESSAGES", 40))

    def extract(self, messages: Sequence[MessageView]) -> Extraction:
        out = Extraction(extractor=self.name)
        for start in range(0, len(messages), self.batch):
            chunk = messages[start : start + self.batch]
            try:
                self._charge_budget(0)
                payload, tokens = self._call(chunk)
                self._charge_budget(tokens)
                part = parse_response(payload, chunk)
                part.tokens_used = tokens
            except LLMError as exc:
                part = RuleExtractor().extract(chunk)
                part.fell_back = True
                part.by_message = {m.id: "rules" for m in chunk}
                part.errors.append(
                    {
                        "extractor": "llm",
                        "error": str(exc)[:500],
                        "messages": f"{chunk[0].id}-{chunk[-1].id}",
                        "fallback": "rules",
                    }
                )
            out.extend(part)
        return out

    def _charge_budget(self, tokens: int) -> None:
        """Refuse when the org's monthly token budget is spent; count ``tokens``."""
        if self.org_id is None:
            return
        from memory.models import KnowledgeSettings

        period = timezone.now().strftime("%Y-%m")
        with transaction.atomic():
            ks, _ = KnowledgeSettings.objects.select_for_update().get_or_create(
                org_id=self.org_id
            )
            if ks.llm_budget_period != period:
                ks.llm_budget_period, ks.llm_tokens_used = period, 0
                ks.save(update_fields=["llm_budget_period", "llm_tokens_used"])
            if tokens:
                KnowledgeSettings.objects.filter(pk=ks.pk).update(
                    llm_tokens_used=F("llm_tokens_used") + tokens
                )
            elif ks.llm_tokens_used >= ks.llm_monthly_token_budget:
                raise LLMError(
                    f"LLM budget spent ({ks.llm_tokens_used}/"
                    f"{ks.llm_monthly_token_budget} tokens this month)"
                )

    def _call(self, chunk: Sequence[MessageView]) -> tuple[dict[str, Any], int]:
        lines = [
            {
                "message_id": m.id,
                "speaker": m.speaker or m.role,
                "time": m.occurred_at.isoformat() if m.occurred_at else None,
                "text": m.content,
            }
            for m in chunk
        ]
        body = json.dumps(
            {
                "model": self.model,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": PROMPT},
                    {"role": "user", "content": json.dumps(lines)},
                ],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "memory_extraction",
                        "schema": RESPONSE_SCHEMA,
                    },
                },
            }
        ).encode()
        request = urllib.request.Request(  # noqa: S310 - URL is operator configuration
            f"{self.base_url}/chat/completions",
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
            },
        )
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
                    raw = json.loads(resp.read().decode())
                content = raw["choices"][0]["message"]["content"]
                usage = int((raw.get("usage") or {}).get("total_tokens") or 0)
                usage = usage or (len(body) + len(content)) // 4
                try:
                    return json.loads(content), usage
                except json.JSONDecodeError as exc:
                    raise LLMError(f"malformed JSON from the model: {exc}") from exc
            except urllib.error.HTTPError as exc:
                last = exc
                if exc.code < 500 and exc.code != 429:
                    break
            except (TimeoutError, urllib.error.URLError) as exc:
                last = exc
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise LLMError(f"unexpected response shape: {exc}") from exc
            if attempt < self.retries:
                time.sleep(min(2.0, 0.2 * 2**attempt))
        raise LLMError(f"LLM request failed: {type(last).__name__}: {last}")


def parse_response(payload: Any, chunk: Sequence[MessageView]) -> Extraction:
    """Validate the model's JSON against the messages; LLMError if unusable."""
    if not isinstance(payload, dict) or not isinstance(
        payload.get("observations"), list
    ):
        raise LLMError("response does not follow the schema (no observations list)")
    by_id = {m.id: m for m in chunk}
    out = Extraction(extractor="llm")
    counters: dict[int, int] = {}
    for item in payload["observations"]:
        if not isinstance(item, dict):
            continue
        message = by_id.get(item.get("message_id"))  # type: ignore[arg-type]
        quote, statement = str(item.get("quote", "")), str(item.get("statement", ""))
        if message is None or not quote or not statement:
            continue
        start = message.content.find(quote)
        if start < 0:
            continue  # an invented quote is not evidence
        ref = message.occurred_at.date() if message.occurred_at else None
        speaker = message.speaker or message.role or "The user"
        index = counters.get(message.id, 0)
        counters[message.id] = index + 1
        obs = ObservationDraft(
            message_id=message.id,
            index=index,
            content=attribute(statement, speaker),
            quote_start=start,
            quote_end=start + len(quote),
            speaker=speaker,
            dates=tuple(resolve_dates(quote, ref)),
        )
        out.observations.append(obs)
        facts = [_fact(obs, f) for f in item.get("facts") or [] if isinstance(f, dict)]
        out.facts += [f for f in facts if f is not None] or extract_facts(obs)
        kind = item.get("procedure") or ""
        if kind in ("procedure", "rule", "lesson"):
            out.procedures.append(ProcedureDraft(message.id, index, kind, obs.content))
    return out


def _fact(obs: ObservationDraft, raw: dict[str, Any]) -> FactDraft | None:
    subject, predicate, obj = (
        str(raw.get(k, "")).strip() for k in ("subject", "predicate", "object")
    )
    if not (subject and predicate and obj):
        return None
    predicate = predicate.lower().replace(" ", "_")[:100]
    negated = bool(raw.get("negated"))
    verb = predicate.replace("_", " ")
    return FactDraft(
        message_id=obs.message_id,
        observation=obs.index,
        subject=subject,
        predicate=predicate,
        object=obj,
        content=f"{subject} {'not ' if negated else ''}{verb} {obj}",
        negated=negated,
        change=predicate in FUNCTIONAL and bool(raw.get("valid_from")),
        valid_from=_date(raw.get("valid_from")),
        valid_to=_date(raw.get("valid_to")),
    )


def _date(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10]) if value else None
    except ValueError:
        return None
