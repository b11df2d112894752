"""The orjson renderer writes the JSON DRF's renderer writes, and falls back to it."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import numpy as np
import pytest
from django.utils.functional import lazy
from rest_framework.renderers import JSONRenderer

from memory.api.renderers import FastJSONRenderer

UTC = dt.UTC


def _both(data):
    return FastJSONRenderer().render(data), JSONRenderer().render(data)


def test_the_values_are_drfs_for_every_type_a_response_carries():
    lazy_text = lazy(lambda: "lazy words", str)()
    data = {
        "id": 7,
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "naive": dt.datetime(2026, 1, 2, 3, 4, 5),
        "day": dt.date(2026, 1, 2),
        "at": dt.time(10, 30),
        "amount": decimal.Decimal("1.25"),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "lazy": lazy_text,
        "score": np.float32(0.5),
        "scores": np.array([0.25, 0.75], dtype=np.float32),
        "tags": {"b"},
        "nested": [{"k": None, "t": True, "f": 1e-05, "big": 1e16}, (1, 2)],
        3: "an int key",
        "text": "café — «quoted» \u2028 line \u2029 para",
    }
    fast, drf = _both(data)
    assert json.loads(fast) == json.loads(drf)
    assert b'":' in fast and b'": ' not in fast and b", " not in fast  # compact
    # Lines and paragraphs separators stay escaped, as DRF writes them (JS-safe).
    assert b"\\u2028" in fast and b"\\u2029" in fast
    assert "\u2028".encode() not in fast
    assert b'"when":"2026-01-02T03:04:05.678000Z"' in fast  # DRF's datetime spelling


def test_what_orjson_refuses_is_rendered_by_drf():
    big = {"n": 2**70, "s": "x"}
    assert FastJSONRenderer().render(big) == JSONRenderer().render(big)
    surrogate = {"s": "\ud800"}  # DRF cannot write it either, and fails the same way
    with pytest.raises(UnicodeEncodeError):
        JSONRenderer().render(surrogate)
    with pytest.raises(UnicodeEncodeError):
        FastJSONRenderer().render(surrogate)


def test_a_type_neither_encoder_knows_fails_as_drf_fails():
    class Opaque:
        pass

    with pytest.raises(TypeError):
        JSONRenderer().render({"x": Opaque()})
    with pytest.raises(TypeError):
        FastJSONRenderer().render({"x": Opaque()})


def test_indented_responses_and_none_are_drfs():
    data = {"a": [1, 2]}
    media = "application/json; indent=4"
    assert FastJSONRenderer().render(data, media) == JSONRenderer().render(data, media)
    assert FastJSONRenderer().render(None) == b""


def test_nan_is_written_as_null_where_strict_drf_would_fail():
    with pytest.raises(ValueError):
        JSONRenderer().render({"x": float("nan")})
    assert json.loads(FastJSONRenderer().render({"x": float("nan")})) == {"x": None}


@pytest.mark.django_db
def test_api_errors_and_answers_come_through_it(client):
    response = client.post("/api/v1/recall", data="{}", content_type="application/json")
    assert response.status_code in (401, 403)
    assert "error" in response.json() or "detail" in response.json()
