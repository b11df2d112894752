"""Per-item explanation of a recall score, as a JSON-ready dict."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from recall.pipeline.types import FusedItem


def _json_safe(value: Any) -> Any:
    """Convert tuples, sets, mappings and non-finite floats to JSON values."""
    # Exact built-in types first: an explanation is mostly these, and the ABC
    # ``isinstance(value, Mapping)`` check below costs several times more.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_safe(item) for item in value), key=repr)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def explain_item(
    item: FusedItem,
    *,
    weights_used: Mapping[str, float],
    phase: int,
    window_match: bool | None,
    graph_path: tuple[str, ...] | None,
    why_packed: str,
    channel_details: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Explain one recalled item: channels, weights, adjustments and why packed.

    Each channel entry has its rank, raw score, weight, RRF term and ``share``
    (its RRF term over the sum of all the item's RRF terms), plus ``detail``
    when ``channel_details`` has one. Neighbour spreading, when present, is
    listed under ``spread_from``; a message that took a share of an observation
    drawn from it names that row in ``corroborated_by``. The result survives
    ``json.dumps``.
    """
    total_rrf = math.fsum(c.rrf for c in item.contributions)
    channels: dict[str, dict[str, Any]] = {}
    for contribution in item.contributions:
        entry: dict[str, Any] = {
            "rank": contribution.rank,
            "score": contribution.score,
            "weight": contribution.weight,
            "rrf": contribution.rrf,
            "share": contribution.rrf / total_rrf if total_rrf > 0 else 0.0,
        }
        detail = channel_details.get(contribution.channel)
        if detail:
            entry["detail"] = detail
        channels[contribution.channel] = entry
    explanation: dict[str, Any] = {
        "memory_id": item.memory_id,
        "phase": phase,
        "score": item.score,
        "channels": channels,
        "weights": dict(weights_used),
        "boosts": dict(item.boosts),
        "penalties": dict(item.penalties),
        "graph_path": list(graph_path) if graph_path is not None else None,
        "window_match": window_match,
        "why_packed": why_packed,
    }
    if item.spread_from:
        explanation["spread_from"] = dict(item.spread_from)
    if item.corroborated_by is not None:
        explanation["corroborated_by"] = item.corroborated_by
    return _json_safe(explanation)  # type: ignore[no-any-return]
