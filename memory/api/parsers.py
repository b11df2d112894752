"""JSON request parsing that refuses what PostgreSQL cannot store.

PostgreSQL text and jsonb cannot hold the NUL character (``\\u0000``); letting one
through turns a bad request into a database error. Refused here with a 400 instead.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_nul(v) for v in value)
    return False


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: dict[str, Any] | None = None,
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if contains_nul(data):
            raise ParseError("the NUL character (\\u0000) is not allowed in any value")
        return data
