"""Row-level security scopes: which organizations a database session may see.

Every table that holds tenant content has a PostgreSQL policy (migration
``accounts/0003_row_level_security``) that admits a row only when its org is in the
session's ``mnemo.org_ids`` setting, or when ``mnemo.scope`` is ``system``. The
application connects as a role that owns no table (``config/db/roles.py``), so the
policy applies to every statement it sends, including a query that forgot its
``org`` filter: such a query returns nothing of another org.

Who sets the scope:

- **requests**: :class:`RowLevelSecurityMiddleware` runs each request in one
  transaction that starts in scope ``none``; resolving the caller's principal
  (``principal_for_request``) narrows it to the caller's org with ``SET LOCAL``.
- **tasks**: Celery's ``task_prerun`` resolves the org(s) of the task's ids and sets
  the session to them until ``task_postrun``; sweeps are an explicit, logged
  ``system`` scope.
- **management commands and shells**: an explicit, logged ``system`` session
  scope (``manage.py``); :func:`scoped` narrows a block to chosen orgs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from celery.signals import task_postrun, task_prerun
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.utils import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.db import roles

logger = logging.getLogger("mnemo.rls")

SCOPE_GUC = "mnemo.scope"
ORGS_GUC = "mnemo.org_ids"
NONE, ORG, SYSTEM = "none", "org", "system"


def _orgs_literal(org_ids: Iterable[int]) -> str:
    return "{" + ",".join(str(int(o)) for o in sorted(set(org_ids))) + "}"


def apply_scope(
    scope: str,
    org_ids: Iterable[int] = (),
    *,
    local: bool = True,
    using: str = DEFAULT_DB_ALIAS,
) -> None:
    """Set the session's scope; ``local``: ``SET LOCAL`` (to transaction end)."""
    conn = connections[using]
    with conn.cursor() as cursor:
        if not local:
            # A session-level change is undone if its transaction rolls back: from
            # here on the session's scope is not known without asking the server.
            conn.mnemo_session_scope = None  # type: ignore[attr-defined]
        cursor.execute(
            "SELECT set_config(%s, %s, %s), set_config(%s, %s, %s)",
            [SCOPE_GUC, scope, local, ORGS_GUC, _orgs_literal(org_ids), local],
        )


def _session_has(scope: str, org_ids: list[int], using: str) -> bool:
    """True when a transaction starting now on ``using`` is in ``scope``/``org_ids``
    already, because its session has never changed scope at session level since it
    was opened in it (a connection not opened yet will open in the thread's scope)."""
    conn = connections[using]
    wanted = (scope, tuple(sorted(set(org_ids))))
    if conn.connection is None:
        return roles.session_start_scope() == wanted
    return getattr(conn, "mnemo_session_scope", None) == wanted


def current_scope(using: str = DEFAULT_DB_ALIAS) -> tuple[str, str]:
    """(scope, org ids literal) of the session, as PostgreSQL sees them now."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(current_setting(%s, true), ''), "
            "coalesce(current_setting(%s, true), '')",
            [SCOPE_GUC, ORGS_GUC],
        )
        row = cursor.fetchone()
    return str(row[0]), str(row[1])


def _restore(previous: tuple[str, str], using: str = DEFAULT_DB_ALIAS) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT set_config(%s, %s, true), set_config(%s, %s, true)",
            [SCOPE_GUC, previous[0], ORGS_GUC, previous[1]],
        )


def activate_principal(principal: Any, using: str = DEFAULT_DB_ALIAS) -> None:
    """Narrow the current transaction to ``principal``'s org (``SET LOCAL``).

    Outside a transaction there is nothing to narrow: ``SET LOCAL`` would end with
    the statement, and the session keeps its default scope.
    """
    if not connections[using].in_atomic_block:
        return
    if principal.is_unrestricted:
        logger.warning("system scope for an unrestricted principal")
        apply_scope(SYSTEM, using=using)
    else:
        orgs = [principal.org_id] if principal.org_id is not None else []
        apply_scope(ORG, orgs, using=using)


@contextlib.contextmanager
def scoped(
    org_ids: Iterable[int] = (),
    *,
    system: bool = False,
    reason: str = "",
    using: str = DEFAULT_DB_ALIAS,
) -> Iterator[None]:
    """A transaction that sees only ``org_ids`` (or, with ``system``, every org)."""
    if system:
        logger.warning("system scope: %s", reason or "unspecified")
    with transaction.atomic(using=using):
        previous = current_scope(using)
        apply_scope(SYSTEM if system else ORG, org_ids, using=using)
        try:
            yield
        finally:
            if not connections[using].needs_rollback:
                with contextlib.suppress(DatabaseError):
                    _restore(previous, using)


# --- requests -----------------------------------------------------------------------

EXEMPT_PREFIXES = ("/healthz", "/readyz", "/static/")


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: the database is down or restarting."""
    message = "the database is unavailable; retry shortly"
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"error": message}, status=503)
    else:
        response = HttpResponse(message, status=503, content_type="text/plain")
    response["Retry-After"] = "5"
    return response


def _admin_scope(request: HttpRequest) -> tuple[str, list[int]]:
    """Django admin: superusers see every org (logged); staff, the orgs they run."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_staff:
        return NONE, []
    if user.is_superuser:
        logger.info("system scope: admin request by superuser %s", user.pk)
        return SYSTEM, []
    from accounts.admin_scope import admin_org_ids

    return ORG, sorted(admin_org_ids(request))


def _transaction_failed(using: str) -> bool:
    conn = connections[using]
    if conn.needs_rollback or conn.connection is None:
        return True
    status = getattr(conn.connection.info, "transaction_status", None)
    return status is not None and int(status) == 3  # psycopg TransactionStatus.INERROR


class RowLevelSecurityMiddleware:
    """Run each request in one transaction whose RLS scope starts at ``none``.

    Place after ``AuthenticationMiddleware``. A request that cannot reach the
    database gets 503 with ``Retry-After`` (the next request reconnects).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(EXEMPT_PREFIXES):
            return self.get_response(request)
        using = DEFAULT_DB_ALIAS
        try:
            nested = connections[using].in_atomic_block
            with transaction.atomic(using=using):
                previous = current_scope(using) if nested else None
                scope, orgs = (
                    _admin_scope(request)
                    if request.path.startswith("/admin/")
                    else (NONE, [])
                )
                if nested or not _session_has(scope, orgs, using):
                    # A web process's sessions open in scope none and keep it: the
                    # request's transaction starts there without a round trip.
                    apply_scope(scope, orgs, using=using)
                response = self.get_response(request)
                if response.status_code >= 500 or _transaction_failed(using):
                    transaction.set_rollback(True, using=using)
                elif previous is not None:
                    _restore(previous, using)
        except (OperationalError, InterfaceError):
            logger.warning(
                "database unavailable for %s %s", request.method, request.path
            )
            return unavailable_response(request)
        return response

    def process_exception(
        self, request: HttpRequest, exc: Exception
    ) -> HttpResponse | None:
        if isinstance(exc, OperationalError | InterfaceError):
            return unavailable_response(request)
        return None


# --- tasks --------------------------------------------------------------------------


def _orgs_of(table: str, ids: Any) -> list[int]:
    if ids is None:
        return []
    id_list = [int(i) for i in (ids if isinstance(ids, list | tuple) else [ids])]
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT org_id FROM {table} WHERE id = ANY(%s)",  # noqa: S608 - fixed names
            [id_list],
        )
        return [row[0] for row in cursor.fetchall()]


def _first_arg(args: Any, kwargs: Any, name: str) -> Any:
    if args:
        return args[0]
    return (kwargs or {}).get(name)


TaskOrgs = Callable[[Any, Any], list[int] | None]
# Task name -> the orgs it works for (None: every org, an explicit system scope).
TASK_ORGS: dict[str, TaskOrgs] = {
    "memory.tasks.embed_memories": lambda a, k: _orgs_of(
        "memory_memory", _first_arg(a, k, "ids")
    ),
    "memory.tasks.index_facts": lambda a, k: _orgs_of(
        "memory_memory", _first_arg(a, k, "ids")
    ),
    "memory.tasks.consolidate_session": lambda a, k: _orgs_of(
        "memory_session", _first_arg(a, k, "session_id")
    ),
    "memory.tasks.sweep_pending": lambda a, k: None,
    "memory.tasks.refresh_drift": lambda a, k: None,
    "memory.tasks.sync_vector_indexes": lambda a, k: None,
    "recall.tasks.refresh_term_stats": lambda a, k: None,
}


@task_prerun.connect
def _task_scope(
    sender: Any = None, task: Any = None, args: Any = None, kwargs: Any = None, **_: Any
) -> None:
    """Scope the worker's session to the org(s) of the task's ids for the task's run.

    A task runs several short transactions (embedding marks rows failed in one, then
    retries), so its scope is set for the session and reset in ``task_postrun``.
    """
    name = getattr(task, "name", "")
    resolver = TASK_ORGS.get(name)
    try:
        _task_apply(SYSTEM, ())  # to look up the org of the task's ids
        if resolver is None:
            logger.warning("system scope: task %s declares no org resolver", name)
            return
        orgs = resolver(args, kwargs)
        if orgs is None:
            logger.info("system scope: task %s works across organizations", name)
            return
        _task_apply(ORG, tuple(orgs))
    except (OperationalError, InterfaceError):
        # The task will fail on the database too; a reconnect starts scoped to nothing.
        roles.set_thread_scope(NONE)
        logger.warning("could not scope task %s: database unavailable", name)


def _task_apply(scope: str, orgs: tuple[int, ...]) -> None:
    roles.set_thread_scope(scope, orgs)
    apply_scope(scope, orgs, local=False)


@task_postrun.connect
def _task_unscope(**_: Any) -> None:
    roles.set_thread_scope(None)
    if connections[DEFAULT_DB_ALIAS].connection is not None:
        with contextlib.suppress(DatabaseError):
            apply_scope(roles.default_scope(), local=False)
