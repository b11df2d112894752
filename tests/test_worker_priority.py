"""Celery workers yield the CPU to web requests and embed with their own threads."""

from __future__ import annotations

import pytest

from config import celery as celery_config
from memory import embeddings


@pytest.fixture
def nice_calls(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(celery_config.os, "nice", lambda n: calls.append(n))
    monkeypatch.setattr(embeddings, "_process_threads", None)
    monkeypatch.setattr(embeddings, "_process_runs", 1)
    monkeypatch.setattr(embeddings, "_process_idle", False)
    return calls


def test_worker_start_lowers_priority_and_sets_threads(settings, nice_calls):
    calls = nice_calls
    settings.MNEMO_WORKER_NICE = 7
    settings.MNEMO_WORKER_EMBEDDING_THREADS = 2
    settings.MNEMO_WORKER_EMBEDDING_RUNS = 3
    settings.MNEMO_WORKER_EMBEDDING_IDLE = True
    celery_config._worker_priority()
    assert calls == [7]
    assert embeddings._process_threads == 2
    assert embeddings._process_runs == 3
    assert embeddings._process_idle


@pytest.mark.parametrize("idle", [True, False])
def test_a_worker_s_embedding_runs_take_only_idle_cpu_when_asked(idle, monkeypatch):
    import os

    monkeypatch.setattr(embeddings, "_process_runs", 2)
    monkeypatch.setattr(embeddings, "_process_idle", idle)
    pool = embeddings._runs_pool(2)
    policies = set(pool.map(lambda _: os.sched_getscheduler(0), range(8)))
    assert policies == {os.SCHED_IDLE if idle else os.SCHED_OTHER}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller keeps its own


def test_zero_leaves_priority_and_threads_alone(settings, nice_calls):
    calls = nice_calls
    settings.MNEMO_WORKER_NICE = 0
    settings.MNEMO_WORKER_EMBEDDING_THREADS = 0
    settings.MNEMO_WORKER_EMBEDDING_RUNS = 1
    settings.MNEMO_WORKER_EMBEDDING_IDLE = False
    celery_config._worker_priority()
    assert calls == []
    assert embeddings._process_threads is None
    assert embeddings._process_runs == 1
    assert not embeddings._process_idle


def test_the_broker_connection_is_warmed_once_and_a_dead_broker_is_only_logged(
    monkeypatch, caplog
):
    from contextlib import contextmanager

    opened = []

    class Producer:
        class connection:  # noqa: N801 - stands in for kombu's attribute
            @staticmethod
            def ensure_connection(max_retries):
                opened.append(max_retries)

        @staticmethod
        def maybe_declare(queue):
            pass

    @contextmanager
    def producer_or_acquire():
        yield Producer

    monkeypatch.setattr(celery_config, "_producer_warmed", False)
    monkeypatch.setitem(celery_config.app.conf, "task_always_eager", False)
    monkeypatch.setattr(celery_config.app, "producer_or_acquire", producer_or_acquire)
    assert celery_config.warm_producer() is True
    assert celery_config.warm_producer() is False  # once per process
    assert opened == [1]

    @contextmanager
    def broken():
        raise ConnectionError("broker down")
        yield

    monkeypatch.setattr(celery_config, "_producer_warmed", False)
    monkeypatch.setattr(celery_config.app, "producer_or_acquire", broken)
    assert celery_config.warm_producer() is False
    assert "could not warm the broker connection" in caplog.text


def test_eager_mode_has_no_broker_to_warm(monkeypatch):
    monkeypatch.setattr(celery_config, "_producer_warmed", False)
    monkeypatch.setitem(celery_config.app.conf, "task_always_eager", True)
    assert celery_config.warm_producer() is False
