"""Two database roles: the owner runs migrations, the application role serves traffic.

The tables belong to the role in ``DATABASES`` (``postgres`` for the embedded server,
the ``DATABASE_URL`` user otherwise). Row-level security does not apply to a table's
owner nor to superusers, so web and worker processes connect as a separate login role
(``MNEMO_DB_APP_ROLE``, default ``mnemo_app``) that owns nothing and has no
``BYPASSRLS``. The first connection of every process provisions it with the owner's
credentials: the role, its grants, default privileges for tables later migrations
create, and the audit table's append-only rule (no UPDATE/DELETE).

``owner_mode()`` switches a connection alias to the owner for the duration of a block;
``migrate``, ``flush`` and test-database creation use it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

logger = logging.getLogger("mnemo.db")

_lock = threading.Lock()
_provisioned: set[tuple[str, str, str, str]] = set()
# Tables the application role may insert into and read, never change or delete.
APPEND_ONLY_TABLES = ("accounts_auditevent",)
# Full-text matching is not marked LEAKPROOF by PostgreSQL, so under a row-level
# security policy the planner refuses to use the GIN index for ``search @@ query``.
# The function only returns a boolean and raises no data-dependent error; marking it
# leakproof (superuser only, best effort) restores index scans for the app role.
LEAKPROOF_FUNCTIONS = ("pg_catalog.ts_match_vq(tsvector, tsquery)",)
PROVISION_LOCK = 7_201_944_311  # pg_advisory_xact_lock key: one provisioner at a time


def app_role(settings_dict: dict[str, Any]) -> str:
    """The application role's name, or "" when RLS enforcement is switched off."""
    role = str(settings_dict.get("MNEMO_APP_ROLE") or "")
    if role and role == settings_dict.get("USER"):
        return ""  # the owner itself: no separate role to switch to
    return role


def is_owner_mode(wrapper: Any) -> bool:
    return bool(getattr(wrapper, "_mnemo_owner_depth", 0))


@contextlib.contextmanager
def owner_mode(wrapper: Any) -> Iterator[None]:
    """Connect ``wrapper`` (a Django connection) as the table owner inside the block."""
    if wrapper.in_atomic_block:
        raise RuntimeError("owner_mode cannot switch roles inside a transaction")
    wrapper.close()
    wrapper._mnemo_owner_depth = getattr(wrapper, "_mnemo_owner_depth", 0) + 1
    try:
        yield
    finally:
        wrapper.close()
        wrapper._mnemo_owner_depth -= 1


def owner_params(
    conn_params: dict[str, Any], settings_dict: dict[str, Any]
) -> dict[str, Any]:
    """psycopg parameters for the owner, from Django's connection parameters."""
    keys = ("host", "port", "dbname", "sslmode", "sslrootcert", "sslcert", "sslkey")
    params = {k: conn_params[k] for k in keys if conn_params.get(k)}
    params["user"] = settings_dict.get("USER") or "postgres"
    if settings_dict.get("PASSWORD"):
        params["password"] = settings_dict["PASSWORD"]
    return params


def app_password(settings_dict: dict[str, Any]) -> str:
    """MNEMO_DB_APP_PASSWORD, else the owner's password (every process agrees on it)."""
    return str(
        settings_dict.get("MNEMO_APP_PASSWORD") or settings_dict.get("PASSWORD") or ""
    )


def provision(
    params: dict[str, Any], role: str, password: str, *, force: bool = False
) -> None:
    """Create ``role`` and grant it what the application needs, once per process."""
    key = (
        str(params.get("host")),
        str(params.get("port")),
        str(params.get("dbname")),
        role,
    )
    with _lock:
        if key in _provisioned and not force:
            return
        try:
            with psycopg.connect(**params, connect_timeout=10, autocommit=True) as conn:
                _provision(conn, role, password)
        except psycopg.Error as exc:
            raise ImproperlyConfigured(
                f"Could not provision the application role {role!r} as "
                f"{params.get('user')!r}: {exc}. Create it yourself (LOGIN, no "
                "BYPASSRLS, owning no tables), grant it SELECT/INSERT/UPDATE/DELETE "
                "on the tables, "
                "or set MNEMO_DB_APP_ROLE='' to run without row-level security."
            ) from exc
        _provisioned.add(key)


def _provision(conn: psycopg.Connection[Any], role: str, password: str) -> None:
    ident = sql.Identifier(role)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [PROVISION_LOCK])
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", [role]
        ).fetchone()
        if row is None:
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS "
                    "NOCREATEDB NOCREATEROLE"
                ).format(ident)
            )
            logger.info("created the application database role %s", role)
        elif row[0] or row[1]:
            raise ImproperlyConfigured(
                f"The application role {role!r} is a superuser or has BYPASSRLS; "
                "row-level security would not apply to it."
            )
        if password:
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    ident, sql.Literal(password)
                )
            )
        db = conn.info.dbname
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(db), ident
            )
        )
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident))
        table_privs = "SELECT, INSERT, UPDATE, DELETE"
        if conn.info.server_version >= 170000:
            table_privs += ", MAINTAIN"  # ANALYZE after bulk loads, never RLS bypass
        missing = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
            "AND NOT has_table_privilege(%s, format('%%I.%%I', schemaname, tablename), "
            "'SELECT')",
            [role],
        ).fetchone()
        if missing and missing[0]:
            conn.execute(
                sql.SQL("GRANT {} ON ALL TABLES IN SCHEMA public TO {}").format(
                    sql.SQL(table_privs), ident
                )
            )
            conn.execute(
                sql.SQL(
                    "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES "
                    "IN SCHEMA public TO {}"
                ).format(ident)
            )
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT {} ON TABLES TO {}"
            ).format(sql.SQL(table_privs), ident)
        )
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA public "
                "GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {}"
            ).format(ident)
        )
        for table in APPEND_ONLY_TABLES:
            if conn.execute("SELECT to_regclass(%s)", [table]).fetchone()[0]:  # type: ignore[index]
                conn.execute(
                    sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE ON {} FROM {}").format(
                        sql.Identifier(table), ident
                    )
                )
    _mark_leakproof(conn)


def _mark_leakproof(conn: psycopg.Connection[Any]) -> None:
    superuser = conn.execute(
        "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
    )
    if not (row := superuser.fetchone()) or not row[0]:
        logger.info(
            "not a superuser: full-text search under RLS will not use its index"
        )
        return
    for signature in LEAKPROOF_FUNCTIONS:
        done = conn.execute(
            "SELECT proleakproof FROM pg_proc WHERE oid = %s::regprocedure", [signature]
        ).fetchone()
        if done and not done[0]:
            with contextlib.suppress(psycopg.Error), conn.transaction():
                conn.execute(f"ALTER FUNCTION {signature} LEAKPROOF")


# --- the scope a new database session starts in ---------------------------------------
# "none" sees no tenant rows until a request or task sets its org (accounts/rls.py);
# "system" (management commands, the test process) sees every org and is logged.
_default_scope = {"scope": "none", "reason": "", "logged": ""}


_thread = threading.local()


def default_scope() -> str:
    return _default_scope["scope"]


def session_start_scope() -> tuple[str, tuple[int, ...]]:
    """(scope, org ids) a connection opened now starts in: the thread's task scope,
    else the process default."""
    scope, org_ids = getattr(_thread, "scope", None) or (default_scope(), ())
    return scope, tuple(int(o) for o in org_ids)


def session_options() -> str:
    """``-c`` options of a new connection: the thread's task scope, else default."""
    scope, org_ids = session_start_scope()
    orgs = "{" + ",".join(str(o) for o in org_ids) + "}"
    return f"-c mnemo.scope={scope} -c mnemo.org_ids={orgs}"


def set_thread_scope(scope: str | None, org_ids: tuple[int, ...] = ()) -> None:
    """Scope new connections of this thread (a running task); None = the default.

    Celery's Django fix-up may close the connection between ``task_prerun`` and the
    task body; a reconnect then still starts in the task's scope.
    """
    _thread.scope = None if scope is None else (scope, tuple(org_ids))


def set_default_scope(scope: str, *, reason: str) -> None:
    """Set the scope new sessions of this process start in ("none" or "system")."""
    if scope not in ("none", "system"):
        raise ValueError(f"unknown default scope {scope!r}")
    _default_scope.update(scope=scope, reason=reason, logged="")


def log_default_scope() -> None:
    """Say once per process that its sessions see every org (logging is set up)."""
    if _default_scope["scope"] == "system" and not _default_scope.get("logged"):
        _default_scope["logged"] = "yes"
        logger.info(
            "system scope: database sessions of this process see every organization "
            "(%s)",
            _default_scope["reason"],
        )


def reprovision(wrapper: Any) -> None:
    """Grant the application role on tables a migration just created (owner mode)."""
    role = app_role(wrapper.settings_dict)
    if not role:
        return
    params = wrapper.get_connection_params()
    provision(
        owner_params(params, wrapper.settings_dict),
        role,
        app_password(wrapper.settings_dict),
        force=True,
    )
