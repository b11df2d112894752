"""JSON responses encoded with orjson: the same JSON as DRF's renderer writes.

A recall answer is ~16 KB of nested dicts (items, explain, citations); DRF's
``JSONRenderer`` (the standard library's encoder) took 0.39 ms to encode one on this
project's bench machine, orjson ~0.04 (docs/benchmarks.md, session 25). The output
parses to the same values as DRF's with the settings this project uses
(``UNICODE_JSON``, ``COMPACT_JSON``): UTF-8, no spaces, datetimes, dates, times,
decimals, lazy strings and iterables through DRF's own encoder, U+2028 / U+2029
escaped. Only float spelling differs (``1e-5`` where the standard library writes
``1e-05``). What orjson refuses (an integer past 64 bits, a lone surrogate, a type
DRF's encoder cannot turn into JSON) and indented responses go to DRF's renderer as
before, so their errors are DRF's. One difference: NaN and infinity, which DRF's strict
mode refuses with a 500, are written as ``null``.
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


class FastJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        if (
            self.ensure_ascii
            or not self.compact
            or self.get_indent(accepted_media_type, renderer_context or {}) is not None
        ):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(
                data, default=self.encoder_class().default, option=_OPTIONS
            )
        except (orjson.JSONEncodeError, TypeError, ValueError):
            return super().render(data, accepted_media_type, renderer_context)
        if b"\xe2\x80" in out:  # the UTF-8 lead bytes of U+2028 / U+2029
            out = out.replace("\u2028".encode(), b"\\u2028").replace(
                "\u2029".encode(), b"\\u2029"
            )
        return out
