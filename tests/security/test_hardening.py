"""Resource and rate limits, idempotency under concurrency, deploy checks, headers."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as dj_settings
from django.db import connections

from accounts.models import ApiKey
from memory.api.idempotency import lock_key
from memory.models import Memory
from tests.conftest import World, client_for

MEMORY = {
    "memories": [
        {"content": "the deploy window is Friday", "tier": "semantic", "kind": "fact"}
    ]
}


def test_check_deploy_passes_with_production_settings() -> None:
    env = {
        **os.environ,
        "MNEMO_SECURE": "1",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "MNEMO_DEBUG": "0",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests' plugin
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=Path(dj_settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.django_db
def test_console_pages_carry_security_headers_and_a_strict_csp(world: World) -> None:
    response = client_for(world, "alice").get("/memories/")
    assert response.status_code == 200
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.django_db
def test_a_key_over_its_rate_gets_429_with_retry_after(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("accounts.ratelimit.time.time", lambda: 1_000_020.0)
    settings.MNEMO_RATE_LIMIT_PER_MINUTE = 3
    client = client_for(world, "agent_a")
    codes = [client.get("/api/v1/sessions").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = client.get("/api/v1/sessions")
    assert limited.status_code == 429 and limited.json()["error"]
    assert 1 <= int(limited["Retry-After"]) <= 60
    # Another key has its own budget, and a per-key limit overrides the default.
    key, raw = ApiKey.issue(agent=world.agent_a)
    key.rate_limit_per_minute = 1
    key.save(update_fields=["rate_limit_per_minute"])
    other = client_for(world, "anonymous")
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert [other.get("/api/v1/sessions").status_code for _ in range(2)] == [200, 429]


@pytest.mark.django_db
def test_over_limit_inputs_get_a_clear_4xx(world: World, settings: Any) -> None:
    client = client_for(world, "agent_a")
    settings.MNEMO_MAX_BODY_BYTES = 2000
    big = {"memories": [{"content": "x" * 3000, "tier": "semantic", "kind": "fact"}]}
    response = client.post("/api/v1/memories", big, format="json")
    assert response.status_code == 413 and "limit" in response.json()["error"]
    settings.MNEMO_MAX_BODY_BYTES = 20 * 1024 * 1024
    settings.MNEMO_MAX_BATCH = 2
    batch = {"memories": MEMORY["memories"] * 3}
    assert client.post("/api/v1/memories", batch, format="json").status_code == 400
    cases = [
        ("/api/v1/recall", {"query": "q" * 2001}),
        ("/api/v1/recall", {"query": "q", "limit": 101}),
        ("/api/v1/recall", {"query": "q", "budget_tokens": 10**6}),
        ("/api/v1/search", {"query": "q", "limit": 10**4}),
    ]
    for url, body in cases:
        response = client.post(url, body, format="json")
        assert response.status_code == 400, (url, body)
        assert response.json()["field"], (url, body)
    assert client.get("/api/v1/memories?page_size=100000").status_code in (200, 400)
    written = client.post("/api/v1/memories", MEMORY, format="json").json()
    mid = written["items"][0]["id"]
    for depth in ("abc", "0", "99"):
        response = client.get(f"/api/v1/memories/{mid}/trace?depth={depth}")
        assert response.status_code == 400 and response.json()["field"] == "depth"


@pytest.mark.django_db
def test_a_retry_while_the_first_request_is_in_flight_gets_409(world: World) -> None:
    client = client_for(world, "agent_a")
    principal = world.principal("agent_a")
    other = connections.create_connection("default")  # plays the in-flight request
    try:
        with other.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_lock(%s)",
                [lock_key(principal.org_id, principal.label, "k-409")],
            )
        response = client.post(
            "/api/v1/memories", MEMORY, format="json", HTTP_IDEMPOTENCY_KEY="k-409"
        )
        assert response.status_code == 409 and response["Retry-After"] == "1"
        other.close()  # the first request ends; its key is free again
        response = client.post(
            "/api/v1/memories", MEMORY, format="json", HTTP_IDEMPOTENCY_KEY="k-409"
        )
        assert response.status_code == 201
        again = client.post(
            "/api/v1/memories", MEMORY, format="json", HTTP_IDEMPOTENCY_KEY="k-409"
        )
        assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
        changed = {"memories": [{**MEMORY["memories"][0], "content": "other"}]}
        assert (
            client.post(
                "/api/v1/memories", changed, format="json", HTTP_IDEMPOTENCY_KEY="k-409"
            ).status_code
            == 422
        )
    finally:
        other.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_requests_with_one_key_write_exactly_once(
    world: World, live_server: Any
) -> None:
    body = json.dumps(
        {
            "memories": [
                {"content": "concurrency probe 50", "tier": "semantic", "kind": "fact"}
            ]
        }
    ).encode()
    statuses: list[int] = []
    barrier = threading.Barrier(50)

    def post() -> None:
        request = urllib.request.Request(
            live_server.url + "/api/v1/memories",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {world.agent_a_key}",
                "Content-Type": "application/json",
                "Idempotency-Key": "same-50",
            },
        )
        barrier.wait(timeout=30)
        for _ in range(20):  # the test server's listen backlog is small: retry resets
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310
                    statuses.append(resp.status)
                    return
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
                return
            except (ConnectionError, urllib.error.URLError):
                time.sleep(0.05)

    threads = [threading.Thread(target=post) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert len(statuses) == 50
    assert set(statuses) <= {201, 409}, statuses
    assert statuses.count(201) >= 1
    assert Memory.objects.filter(content="concurrency probe 50").count() == 1


@pytest.mark.django_db
def test_every_statement_runs_under_a_statement_timeout() -> None:
    # Set for every connection (config/settings.py), so the request path is bounded.
    with connections["default"].cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        timeout = cursor.fetchone()[0]
    assert timeout not in ("0", "") and timeout.endswith(("s", "ms", "min"))
