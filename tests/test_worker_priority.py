"""Celery workers yield the CPU to web requests and embed with their own threads."""

from __future__ import annotations

from config import celery as celery_config
from memory import embeddings


def test_worker_start_lowers_priority_and_sets_threads(settings, monkeypatch):
    calls = []
    monkeypatch.setattr(celery_config.os, "nice", lambda n: calls.append(n))
    monkeypatch.setattr(embeddings, "_process_threads", None)
    settings.MNEMO_WORKER_NICE = 7
    settings.MNEMO_WORKER_EMBEDDING_THREADS = 2
    celery_config._worker_priority()
    assert calls == [7]
    assert embeddings._process_threads == 2


def test_zero_leaves_priority_and_threads_alone(settings, monkeypatch):
    calls = []
    monkeypatch.setattr(celery_config.os, "nice", lambda n: calls.append(n))
    monkeypatch.setattr(embeddings, "_process_threads", None)
    settings.MNEMO_WORKER_NICE = 0
    settings.MNEMO_WORKER_EMBEDDING_THREADS = 0
    celery_config._worker_priority()
    assert calls == []
    assert embeddings._process_threads is None
