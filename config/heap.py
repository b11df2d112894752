"""Keep the garbage collector's full passes short in long-lived server processes.

A web worker holds the embedding model, the tokenizer and every imported module:
millions of objects that live as long as the process. CPython's full (generation 2)
collection walks all of them; measured in a gunicorn worker at 100k memories it took
50-127 ms and landed inside whichever request triggered it, one write or recall in
ten (docs/benchmarks.md, session 6). Once the process has loaded what serving needs,
:func:`freeze_once` moves every object alive then into the permanent generation
(``gc.freeze``), so later full passes only walk what requests allocate. A web worker
that only writes never loads the model and still held enough (Django, DRF, NumPy and
friends) for ~50 ms passes, so it freezes after its first request as well.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

logger = logging.getLogger(__name__)

_stage = 0  # 0: nothing frozen; 1: what serving imports; 2: also the models


def _models_loaded() -> bool:
    from memory import embeddings

    return embeddings.query_model_loaded()


def freeze_once(**_: Any) -> bool:
    """Collect, then freeze what is alive: after the first request (everything the
    process imported) and again once the embedding model is loaded (the first recall
    of a web worker, the start of a Celery worker). True if it froze now."""
    global _stage
    from django.conf import settings

    if not settings.MNEMO_GC_FREEZE or _stage == 2:
        return False
    loaded = _models_loaded()
    if _stage == 1 and not loaded:
        return False
    _stage = 2 if loaded else 1
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    logger.info(
        "gc: %d long-lived objects frozen in %.0f ms",
        gc.get_freeze_count(),
        (time.perf_counter() - started) * 1000,
    )
    return True


def reset_for_tests() -> None:
    global _stage
    _stage = 0
    gc.unfreeze()
