"""Helpers for knowledge-tier tests: write messages as a persona, embed, consolidate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from accounts.principals import Principal
from memory import services
from memory.consolidation.service import consolidate_session
from memory.models import ConsolidationRun, Memory, Session
from memory.services import MemoryInput


class Writer:
    """Writes a conversation the way the API does, then runs the background steps."""

    def __init__(self, world: Any) -> None:
        self.world = world

    def session(self, persona: str, external_id: str, **kw: Any) -> Session:
        return services.session_create(
            principal=self.world.principal(persona), external_id=external_id, **kw
        )

    def say(
        self,
        persona: str,
        session: Session,
        *turns: tuple[str, str, datetime],
        visibility: str | None = None,
    ) -> list[Memory]:
        principal: Principal = self.world.principal(persona)
        items = [
            MemoryInput(
                content=text, speaker=speaker, occurred_at=when, visibility=visibility
            )
            for speaker, text, when in turns
        ]
        result = services.memory_remember(
            principal=principal, items=items, session=session, enqueue=False
        )
        services.memory_embed(ids=[m.pk for m in result.memories])
        return result.memories

    def consolidate(self, session: Session, **kw: Any) -> ConsolidationRun | None:
        run = consolidate_session(session.pk, **kw)
        pending = Memory.objects.pending_embedding().values_list("id", flat=True)
        services.memory_embed(ids=list(pending))
        return run


@pytest.fixture
def writer(world: Any) -> Writer:
    return Writer(world)


def derived(kind: str, **filters: Any) -> list[Memory]:
    return list(Memory.objects.filter(kind=kind, **filters).order_by("id"))
