"""``Idempotency-Key``: same key + same body replays the first response; another body is 422.

Keys are scoped to the principal (and org). The record is inserted in the same transaction
as the write it guards, so a concurrent request with the same key waits on the unique
index until the first commits, then replays it: exactly one write. A request that fails
(non-2xx) rolls its record back, so the key can be retried.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import principal_for_request
from memory.api.errors import error_response
from memory.models import IdempotencyRecord

MAX_KEY_LENGTH = 200


def idempotent(view: Callable[..., Response]) -> Callable[..., Response]:
    @functools.wraps(view)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return view(self, request, *args, **kwargs)
        if not key.strip() or len(key) > MAX_KEY_LENGTH:
            return error_response(
                f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} characters",
                status_code=400, field="Idempotency-Key",
            )
        principal = principal_for_request(request)
        digest = hashlib.sha256(
            request.method.encode() + b" " + request.path.encode() + b"\n" + request.body
        ).hexdigest()
        with transaction.atomic():
            try:
                with transaction.atomic():
                    record = IdempotencyRecord.objects.create(
                        org_id=principal.org_id, principal=principal.label, key=key,
                        request_hash=digest,
                    )
            except IntegrityError:
                first = IdempotencyRecord.objects.get(
                    org_id=principal.org_id, principal=principal.label, key=key
                )
                if first.request_hash != digest:
                    return error_response(
                        "Idempotency-Key was already used with a different request body",
                        status_code=422, field="Idempotency-Key",
                    )
                if first.status_code is None:
                    return error_response(
                        "a request with this Idempotency-Key is still in progress",
                        status_code=409, field="Idempotency-Key",
                    )
                return Response(
                    first.response, status=first.status_code,
                    headers={"Idempotent-Replayed": "true"},
                )
            response = view(self, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)
                return response
            record.status_code = response.status_code
            record.response = json.loads(JSONRenderer().render(response.data))
            record.save(update_fields=["status_code", "response"])
        return response

    return wrapper
