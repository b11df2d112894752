"""Extractors turn messages into observation, fact and procedure drafts.

``RuleExtractor`` is the default and needs no model service. ``LLMExtractor``
(:mod:`memory.consolidation.llm`) is chosen per org (``KnowledgeSettings.extractor``);
whatever it cannot do (no endpoint, budget spent, timeout, malformed output) falls back
to the rules for that batch and the error is recorded on the run: nothing is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memory.consolidation.facts import extract_facts
from memory.consolidation.observations import observe
from memory.consolidation.procedures import extract_procedures
from memory.consolidation.types import Extraction, MessageView


class Extractor(Protocol):
    name: str

    def extract(self, messages: Sequence[MessageView]) -> Extraction: ...


class RuleExtractor:
    """Sentence salience, pronoun attribution, date rules, S-P-O / how-to patterns."""

    name = "rules"

    def extract(self, messages: Sequence[MessageView]) -> Extraction:
        out = Extraction(extractor=self.name)
        for message in messages:
            observations = observe(message)
            out.observations += observations
            for obs in observations:
                out.facts += extract_facts(obs)
                quote = message.content[obs.quote_start : obs.quote_end]
                out.procedures += extract_procedures(obs, quote)
        return out


def extractor_for_org(org_id: int) -> Extractor:
    """The extractor the org chose; the rules when none is chosen or configured."""
    from memory.consolidation.llm import LLMExtractor, llm_configured
    from memory.models import ExtractorChoice, KnowledgeSettings

    choice = (
        KnowledgeSettings.objects.filter(org_id=org_id)
        .values_list("extractor", flat=True)
        .first()
    )
    if choice == ExtractorChoice.LLM and llm_configured():
        return LLMExtractor(org_id=org_id)
    return RuleExtractor()
