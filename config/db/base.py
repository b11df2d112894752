"""PostgreSQL backend that can start the embedded server and insists on pgvector.

``DATABASES["default"]["MNEMO_EMBEDDED_DIR"]`` set: the first connection of the
process starts (or reattaches to) the embedded PostgreSQL in that folder and talks to
it over its Unix socket. Unset: a plain PostgreSQL backend for ``DATABASE_URL``. Either
way, the first connection checks that the ``vector`` extension is available and fails
with a clear message if it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from django.db.backends.postgresql import creation as base_creation

from config import database
from config.db import arrays, roles

_checked_vector: set[str] = set()


class DatabaseCreation(base_creation.DatabaseCreation):
    """Test databases are created, migrated and dropped by the table owner."""

    def create_test_db(self, *args: Any, **kwargs: Any) -> str:
        with roles.owner_mode(self.connection):
            return super().create_test_db(*args, **kwargs)

    def destroy_test_db(self, *args: Any, **kwargs: Any) -> None:
        with roles.owner_mode(self.connection):
            super().destroy_test_db(*args, **kwargs)


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation

    def get_connection_params(self) -> dict[str, Any]:
        params = self._owner_connection_params()
        role = roles.app_role(self.settings_dict)
        # The no-database connection (create/drop database) is always the owner's.
        if role and not roles.is_owner_mode(self) and self.alias != NO_DB_ALIAS:
            # Serve traffic as the application role: it owns nothing, so row-level
            # security applies to every statement (see config/db/roles.py).
            roles.provision(
                roles.owner_params(params, self.settings_dict),
                role,
                roles.app_password(self.settings_dict),
            )
            params["user"] = role
            password = roles.app_password(self.settings_dict)
            if password:
                params["password"] = password
        # The row-level security scope a fresh session starts in (accounts/rls.py).
        roles.log_default_scope()
        options = f"{params.get('options', '')} {roles.session_options()}"
        if getattr(settings, "MNEMO_RECALL_GENERIC_PLANS", False):
            # Only for statements prepared on purpose (config.db.prepared.lookup_rows).
            options += " -c plan_cache_mode=force_generic_plan"
        params["options"] = options.strip()
        return params

    def _owner_connection_params(self) -> dict[str, Any]:
        embedded_dir = self.settings_dict.get("MNEMO_EMBEDDED_DIR")
        if embedded_dir:
            cleanup = self.settings_dict.get("MNEMO_EMBEDDED_CLEANUP") or "stop"
            host = database.ensure_server(Path(embedded_dir), cleanup=cleanup)
            self.settings_dict["HOST"] = host
            self.settings_dict["USER"] = "postgres"
            self.settings_dict["PORT"] = ""
            # Only the configured database is created on demand; the test runner
            # creates (and drops) its own test database.
            name = self.settings_dict["NAME"]
            if name == self.settings_dict.get("MNEMO_EMBEDDED_DBNAME"):
                database.ensure_database(host, name)
        return super().get_connection_params()

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        # The scope this session starts in (the options get_connection_params just
        # wrote, in this thread), until a session-level change forgets it
        # (accounts/rls.py): a request that would set the scope the session already
        # has skips the round trip.
        self.mnemo_session_scope = roles.session_start_scope()
        arrays.register(connection.adapters)
        if getattr(settings, "MNEMO_RECALL_GENERIC_PLANS", False):
            # Django turns psycopg's prepared statements off (None); prepare only what
            # asks for it (config.db.prepared.lookup_rows), never by count.
            connection.prepare_threshold = 2**31 - 1
        key = f"{conn_params.get('host')}:{conn_params.get('port')}"
        if key not in _checked_vector:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
                )
                found = cursor.fetchone()
            connection.rollback()  # leave the connection idle, as Django expects
            if found is None:
                connection.close()
                raise ImproperlyConfigured(
                    "The PostgreSQL server at "
                    f"{conn_params.get('host') or 'localhost'} has no pgvector "
                    "extension. Install pgvector (e.g. the pgvector/pgvector Docker "
                    "image) or unset DATABASE_URL to use the embedded PostgreSQL."
                )
            _checked_vector.add(key)
        return connection
