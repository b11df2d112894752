"""Per-key request rate limits (OWASP API4): over the limit is 429 with Retry-After.

Each API key (and each signed-in person using the API) has a fixed one-minute window
counted in Django's cache: ``ApiKey.rate_limit_per_minute`` or, when empty,
``MNEMO_RATE_LIMIT_PER_MINUTE`` (0 turns limiting off). With several web processes the
cache must be shared (``MNEMO_CACHE_URL=redis://...``). If the cache is down the
request is allowed and a warning logged: a cache outage must not take the API down.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import BaseThrottle

from accounts.authentication import AgentIdentity

logger = logging.getLogger("mnemo.ratelimit")
WINDOW_SECONDS = 60


def _identity(request: Any) -> tuple[str, int] | None:
    """(bucket name, requests per minute) for the caller, or None when unlimited."""
    user = request.user
    default = int(settings.MNEMO_RATE_LIMIT_PER_MINUTE)
    if isinstance(user, AgentIdentity):
        limit = user.key.rate_limit_per_minute or default
        return f"key:{user.key.pk}", limit
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.pk}", default
    return None


class ApiKeyRateThrottle(BaseThrottle):
    """A fixed one-minute window per key; the window's end is the ``Retry-After``."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        identity = _identity(request)
        if identity is None or identity[1] <= 0:
            return True
        bucket, limit = identity
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        key = f"mnemo:rate:{bucket}:{window}"
        try:
            cache = caches[settings.MNEMO_RATE_LIMIT_CACHE]
            cache.add(key, 0, timeout=WINDOW_SECONDS + 5)
            count = cache.incr(key)
        except Exception as exc:  # noqa: BLE001 - fail open, never fail the request
            logger.warning("rate limit cache unavailable (%s); allowing", exc)
            return True
        if count <= limit:
            return True
        self._wait = (window + 1) * WINDOW_SECONDS - now
        return False

    def wait(self) -> float | None:
        return None if self._wait is None else float(max(1, math.ceil(self._wait)))
