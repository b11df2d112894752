from __future__ import annotations

import pytest


def test_healthz_answers_without_dependencies(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_checks_database_extension_and_embedder(client):
    r = client.get("/readyz")
    body = r.json()
    assert r.status_code == 200, body
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["pgvector"].startswith("ok")
    assert body["checks"]["embedder"] == "ok"


@pytest.mark.django_db
def test_readyz_is_503_when_the_embedder_is_off(client, settings):
    settings.MNEMO_EMBEDDING_ENABLED = False
    r = client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["embedder"].startswith("unavailable")


@pytest.mark.django_db
def test_openapi_schema_and_swagger_ui_are_served(client):
    r = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    paths = r.json()["paths"] if r["Content-Type"].endswith("json") else None
    if paths is None:
        import yaml

        paths = yaml.safe_load(r.content)["paths"]
    assert "/api/v1/sessions/{session_id}/messages" in paths
    assert "/api/v1/memories/{memory_id}/supersede" in paths
    assert client.get("/api/docs/").status_code == 200
