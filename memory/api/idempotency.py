"""``Idempotency-Key``: same key + same body replays the first response; else 422.

Keys are scoped to the principal (and org). A request holds a transaction-scoped
advisory lock on its key while it runs; a concurrent request with the same key that
finds the lock taken gets 409 at once (the first is still in flight; retry later), and
one that comes after the first committed replays its stored response: exactly one
write. The record is
inserted in the same transaction as the write, and a request that fails (non-2xx) rolls
it back, so the key can be retried.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, connection, transaction
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import principal_for_request
from memory.api.errors import error_response
from memory.models import IdempotencyRecord

MAX_KEY_LENGTH = 200


def lock_key(org_id: int | None, principal: str, key: str) -> int:
    """The 64-bit advisory-lock id of an idempotency key."""
    digest = hashlib.sha256(f"{org_id}\x00{principal}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _try_lock(org_id: int | None, principal: str, key: str) -> bool:
    """Take the key's advisory lock until the transaction ends; False if it is held."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(%s)", [lock_key(org_id, principal, key)]
        )
        return bool(cursor.fetchone()[0])


def idempotent(view: Callable[..., Response]) -> Callable[..., Response]:
    @functools.wraps(view)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return view(self, request, *args, **kwargs)
        if not key.strip() or len(key) > MAX_KEY_LENGTH:
            return error_response(
                f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} characters",
                status_code=400,
                field="Idempotency-Key",
            )
        principal = principal_for_request(request)
        digest = hashlib.sha256(
            request.method.encode()
            + b" "
            + request.path.encode()
            + b"\n"
            + request.body
        ).hexdigest()
        with transaction.atomic():
            if not _try_lock(principal.org_id, principal.label, key):
                return error_response(
                    "a request with this Idempotency-Key is still in progress",
                    status_code=409,
                    field="Idempotency-Key",
                    headers={"Retry-After": "1"},
                )
            first = IdempotencyRecord.objects.filter(
                org_id=principal.org_id, principal=principal.label, key=key
            ).first()
            if first is not None:
                if first.request_hash != digest:
                    return error_response(
                        "Idempotency-Key was already used with a different "
                        "request body",
                        status_code=422,
                        field="Idempotency-Key",
                    )
                if first.status_code is None:
                    return error_response(
                        "a request with this Idempotency-Key is still in progress",
                        status_code=409,
                        field="Idempotency-Key",
                    )
                return Response(
                    first.response,
                    status=first.status_code,
                    headers={"Idempotent-Replayed": "true"},
                )
            response = view(self, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)
                return response
            try:
                with transaction.atomic():
                    IdempotencyRecord.objects.create(
                        org_id=principal.owner_org_id,
                        principal=principal.label,
                        key=key,
                        request_hash=digest,
                        status_code=response.status_code,
                        response=json.loads(JSONRenderer().render(response.data)),
                    )
            except IntegrityError:
                # Lock keys are 64-bit hashes; a collision with another key that raced
                # us here is astronomically rare, and the write must not stand alone.
                transaction.set_rollback(True)
                return error_response(
                    "a request with this Idempotency-Key is still in progress",
                    status_code=409,
                    field="Idempotency-Key",
                    headers={"Retry-After": "1"},
                )
        return response

    return wrapper
