"""The bench's API keys measure recall throughput, not the rate limiter."""

from __future__ import annotations

from typing import Any

import pytest

from bench import loader
from tests.conftest import World, client_for


@pytest.mark.django_db
def test_bench_keys_are_not_throttled_where_default_keys_are(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("accounts.ratelimit.time.time", lambda: 2_000_020.0)
    settings.MNEMO_RATE_LIMIT_PER_MINUTE = 3
    default = client_for(world, "agent_a")
    assert [default.get("/api/v1/sessions").status_code for _ in range(4)] == [
        200,
        200,
        200,
        429,
    ]
    bench = client_for(world, "anonymous")
    bench.credentials(HTTP_AUTHORIZATION=f"Bearer {loader.issue_key(world.agent_a.pk)}")
    codes = {bench.get("/api/v1/sessions").status_code for _ in range(10)}
    assert codes == {200}
