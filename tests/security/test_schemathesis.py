"""Property-based API fuzzing against the project's own OpenAPI schema (schemathesis).

Bounded (``MNEMO_SCHEMATHESIS_EXAMPLES`` examples per operation, default 12) so it
runs in the default suite: no 5xx, responses match the schema, unauthenticated calls
are refused (``ignored_auth``), and schema-violating input is rejected.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.generation import GenerationMode

from tests.conftest import World

EXAMPLES = int(os.environ.get("MNEMO_SCHEMATHESIS_EXAMPLES", "12"))


@pytest.fixture
def mnemo_schema(db: Any, settings: Any) -> Any:
    settings.MNEMO_RATE_LIMIT_PER_MINUTE = 0
    # Like Django's test client: keep the test's connection (and transaction) open.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _summary(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_summary(e) for e in exc.exceptions)
    text = str(exc).strip()
    return text[:1500] if text else repr(exc)


def test_the_api_honours_its_schema(mnemo_schema: Any, world: World) -> None:
    # schemathesis's pytest plugin does not load under pytest 9, so the operations
    # are driven through Hypothesis here, each in both generation modes.
    auth = {"Authorization": f"Bearer {world.agent_a_key}"}
    failures: list[str] = []
    operations = 0
    for result in mnemo_schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in GenerationMode:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def run(case: Any) -> None:
                # Business rules (a team you are not in, an unknown channel weight)
                # rightly refuse some schema-valid input: positive acceptance is
                # not a property this API promises.
                case.call_and_validate(
                    headers=auth, excluded_checks=[positive_data_acceptance]
                )

            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collect all
                failures.append(f"{operation.label} [{mode.value}]: {_summary(exc)}")
    assert operations >= 15
    assert not failures, "\n\n".join(failures)
