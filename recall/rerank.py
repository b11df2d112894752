"""Optional cross-encoder reranker (any sentence-transformers CrossEncoder path)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=2)
def _model(path: str) -> Any:
    from sentence_transformers import CrossEncoder

    return CrossEncoder(path, device="cpu")


def cross_encoder_scores(path: str, query: str, texts: list[str]) -> list[float]:
    """Sigmoid relevance of each text for the query."""
    raw = _model(path).predict([(query, t) for t in texts], show_progress_bar=False)
    return [1.0 / (1.0 + math.exp(-float(x))) for x in raw]
