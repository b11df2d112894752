"""The optional LLM extractor against a local stub of an OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memory.models import ConsolidationRun, KnowledgeSettings, Memory

MAY = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


class Stub:
    """Answers /chat/completions according to ``mode``; records the requests."""

    def __init__(self) -> None:
        self.mode = "happy"
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "auth": self.headers.get("Authorization"),
                    }
                )
                if stub.mode == "slow":
                    time.sleep(1.5)
                messages = json.loads(body["messages"][1]["content"])
                content = stub.answer(messages)
                raw = json.dumps(
                    {
                        "choices": [{"message": {"content": content}}],
                        "usage": {"total_tokens": 120},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, messages: list[dict[str, Any]]) -> str:
        if self.mode == "malformed":
            return '{"observations": [ {"message_id": '
        m = messages[0]
        return json.dumps(
            {
                "observations": [
                    {
                        "message_id": m["message_id"],
                        "quote": "I relocated to Porto",
                        "statement": "Caroline relocated to Porto in April 2023",
                        "facts": [
                            {
                                "subject": "Caroline",
                                "predicate": "lives_in",
                                "object": "Porto",
                                "valid_from": "2023-04-01",
                            }
                        ],
                        "procedure": "",
                    },
                    {
                        "message_id": m["message_id"],
                        "quote": "words never said",
                        "statement": "An invented claim",
                    },
                ]
            }
        )


@pytest.fixture
def stub(settings: Any, world: Any):  # type: ignore[no-untyped-def]
    s = Stub()
    settings.LLM_BASE_URL = s.url
    settings.LLM_MODEL = "stub-model"
    settings.LLM_API_KEY = "sk-test"
    settings.MNEMO_LLM_TIMEOUT_SECONDS = 0.5
    settings.MNEMO_LLM_MAX_RETRIES = 0
    KnowledgeSettings.objects.create(
        org=world.acme, extractor="llm", llm_monthly_token_budget=1000
    )
    yield s
    s.server.shutdown()
    s.server.server_close()


def _run(writer: Any) -> ConsolidationRun:
    session = writer.session("alice", "llm")
    writer.say(
        "alice",
        session,
        ("Caroline", "Big news: I relocated to Porto last month and I love it.", MAY),
    )
    run = writer.consolidate(session)
    assert run is not None
    return run


def test_happy_path_uses_the_model_output_with_real_quotes_only(writer, stub):
    run = _run(writer)
    assert (run.extractor, run.status, run.errors) == ("llm", "ok", [])
    (obs,) = Memory.objects.filter(kind="observation")
    assert obs.content == "Caroline relocated to Porto in April 2023"
    assert obs.metadata["derived_by"] == "llm"
    assert obs.source_span["quote"] == "I relocated to Porto"
    fact = Memory.objects.get(kind="fact")
    assert fact.valid_from == datetime(2023, 4, 1, tzinfo=UTC)
    request = stub.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["response_format"]["type"] == "json_schema"
    assert KnowledgeSettings.objects.get().llm_tokens_used == 120


@pytest.mark.parametrize(
    "mode, error", [("malformed", "malformed JSON"), ("slow", "LLM request failed")]
)
def test_failures_fall_back_to_rules_and_record_the_error(writer, stub, mode, error):
    stub.mode = mode
    run = _run(writer)
    assert run.status == "fallback"
    assert error in run.errors[0]["error"] and run.errors[0]["fallback"] == "rules"
    obs = Memory.objects.get(kind="observation")
    assert obs.content.startswith("Big news: Caroline relocated to Porto last month")
    assert obs.metadata["derived_by"] == "rules"


def test_a_spent_budget_falls_back_without_calling_the_model(writer, stub):
    KnowledgeSettings.objects.update(
        llm_tokens_used=1000, llm_budget_period=datetime.now(UTC).strftime("%Y-%m")
    )
    run = _run(writer)
    assert run.status == "fallback" and "budget" in run.errors[0]["error"]
    assert stub.requests == []
    assert Memory.objects.filter(kind="observation").count() == 1
