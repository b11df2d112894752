"""The MCP endpoint, driven by the official MCP Python client over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory.models import Memory
from recall.models import Feedback

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {"recall", "remember", "search", "get", "trace", "feedback"}


def run_mcp(
    url: str, key: str | None, fn: Callable[[ClientSession], Awaitable[Any]]
) -> Any:
    """Open an MCP session on ``url`` with a Bearer ``key`` and run ``fn`` in it."""

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await fn(session)

    return anyio.run(main)


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


def test_an_agent_lists_tools_remembers_recalls_and_gives_feedback(world, live_server):
    url = f"{live_server.url}/mcp"

    async def scenario(session: ClientSession) -> dict[str, Any]:
        tools = {t.name for t in (await session.list_tools()).tools}
        stored = payload(
            await session.call_tool(
                "remember",
                {
                    "content": "The staging database password rotates every Friday",
                    "speaker": "ops",
                },
            )
        )
        pack = payload(
            await session.call_tool(
                "recall",
                {
                    "query": "When does the staging database password rotate?",
                    "budget_tokens": 500,
                },
            )
        )
        fb = payload(
            await session.call_tool(
                "feedback", {"recall_id": pack["recall_id"], "verdict": "helpful"}
            )
        )
        got = payload(await session.call_tool("get", {"memory_id": stored["ids"][0]}))
        found = payload(
            await session.call_tool("search", {"query": "staging password"})
        )
        lineage = payload(
            await session.call_tool("trace", {"memory_id": stored["ids"][0]})
        )
        return {
            "tools": tools,
            "stored": stored,
            "pack": pack,
            "fb": fb,
            "got": got,
            "found": found,
            "trace": lineage,
        }

    out = run_mcp(url, world.agent_a_key, scenario)
    assert out["tools"] >= TOOLS
    memory_id = out["stored"]["ids"][0]
    assert Memory.objects.get(pk=memory_id).owner_agent_id == world.agent_a.pk
    assert memory_id in [i["id"] for i in out["pack"]["items"]]
    assert out["pack"]["suggested_actions"][0]["action"] == "feedback"
    assert Feedback.objects.filter(pk=out["fb"]["id"], verdict="helpful").exists()
    assert out["got"]["content"].startswith("The staging database password")
    assert memory_id in [r["id"] for r in out["found"]["results"]]
    assert out["trace"]["id"] == memory_id


def test_a_key_of_another_org_sees_nothing(world, live_server):
    url = f"{live_server.url}/mcp"

    async def write(session: ClientSession) -> int:
        stored = payload(
            await session.call_tool(
                "remember",
                {"content": "Acme launch codename is Bluebird", "visibility": "org"},
            )
        )
        return int(stored["ids"][0])

    memory_id = run_mcp(url, world.agent_a_key, write)

    async def snoop(session: ClientSession) -> dict[str, Any]:
        pack = payload(
            await session.call_tool("recall", {"query": "Acme launch codename"})
        )
        found = payload(
            await session.call_tool("search", {"query": "Bluebird codename"})
        )
        got = await session.call_tool("get", {"memory_id": memory_id})
        traced = await session.call_tool("trace", {"memory_id": memory_id})
        return {"pack": pack, "found": found, "got": got, "traced": traced}

    out = run_mcp(url, world.agent_globex_key, snoop)
    assert out["pack"]["items"] == [] and out["found"]["results"] == []
    assert out["got"].is_error and "not found" in out["got"].content[0].text.lower()
    assert out["traced"].is_error


def test_mcp_without_a_valid_key_is_refused(world, live_server):
    for headers in ({}, {"Authorization": "Bearer mnemo_nope_nope"}):
        r = httpx2.post(
            f"{live_server.url}/mcp",
            headers={**headers, "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        assert r.status_code in (401, 403)


def test_tools_run_in_the_requests_transaction_and_org_scope(world, monkeypatch):
    """Tool calls share the request's connection, so row-level security scopes them."""
    from django.db import connection

    from accounts import rls
    from recall import channels
    from tests.conftest import client_for

    seen = {}
    real = channels.lexical_channel

    def spy(*args, **kwargs):
        seen["scope"] = rls.current_scope()
        seen["atomic"] = connection.in_atomic_block
        return real(*args, **kwargs)

    monkeypatch.setattr(channels, "lexical_channel", spy)
    response = client_for(world, "agent_a").post(
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "anything at all"}},
        },
        format="json",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    assert response.status_code == 200, response.content
    assert seen["atomic"] is True
    assert seen["scope"] == ("org", f"{{{world.acme.pk}}}")
