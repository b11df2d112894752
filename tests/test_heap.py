"""Server processes freeze their long-lived heap once the models are loaded."""

from __future__ import annotations

import gc

import pytest

from config import heap
from memory import embeddings


@pytest.fixture
def fresh_heap(settings):
    settings.MNEMO_GC_FREEZE = True
    heap.reset_for_tests()
    yield
    heap.reset_for_tests()


def test_freezes_after_the_first_request_and_once_more_for_the_model(
    fresh_heap, monkeypatch
):
    monkeypatch.setattr(embeddings, "query_model_loaded", lambda: False)
    assert heap.freeze_once() is True  # what the process imported
    first = gc.get_freeze_count()
    assert first > 0
    assert heap.freeze_once() is False  # nothing new until the model loads
    monkeypatch.setattr(embeddings, "query_model_loaded", lambda: True)
    keep = [[] for _ in range(1000)]  # stands in for the model's objects
    assert heap.freeze_once() is True
    assert gc.get_freeze_count() >= first + len(keep)
    assert heap.freeze_once() is False  # never again in this process


def test_the_setting_switches_it_off(fresh_heap, settings, monkeypatch):
    settings.MNEMO_GC_FREEZE = False
    monkeypatch.setattr(embeddings, "query_model_loaded", lambda: True)
    assert heap.freeze_once() is False
    assert gc.get_freeze_count() == 0


def test_a_served_request_triggers_it(fresh_heap, client, monkeypatch):
    monkeypatch.setattr(embeddings, "query_model_loaded", lambda: True)
    client.get("/healthz")
    assert gc.get_freeze_count() > 0
