"""Celery application: Redis broker when CELERY_BROKER_URL is set, eager otherwise."""

import contextlib
import logging
import os
import sys

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)

app = Celery("mnemo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def warm_embedding_model(**_: object) -> None:
    """Load the embedding model when a worker (process) starts, not on its first task.

    Measured (docs/benchmarks.md): a cold worker loaded the model inside the first
    embedding task, and every message written meanwhile waited for it. A load failure
    is only logged here; the tasks report it as they always do.
    """
    from django.conf import settings

    if not getattr(settings, "MNEMO_WORKER_WARM_MODEL", True):
        return
    from memory import embeddings

    with contextlib.suppress(embeddings.EmbedderUnavailable):
        embeddings.get_model()
    from config.heap import freeze_once

    freeze_once()


def _warm_in_main_process(sender: object = None, **kwargs: object) -> None:
    """Solo / thread pools run tasks in the main process: warm it (prefork children
    warm themselves through ``worker_process_init``)."""
    pool_cls = getattr(getattr(sender, "controller", None), "pool_cls", None)
    if "prefork" not in getattr(pool_cls, "__module__", "prefork"):
        warm_embedding_model()


_producer_warmed = False


def warm_producer(**_: object) -> bool:
    """Open this process's broker connection once, after its first request.

    The first task a web process enqueued connected to the broker inside that request:
    ~125 ms, the write API's p95 at 100k and 1M (each gunicorn worker's first write;
    docs/benchmarks.md, session 6). Returns True when it connected now. A broker that
    is down is only logged: writes do not need it (the sweep re-enqueues).
    """
    global _producer_warmed
    if _producer_warmed or app.conf.task_always_eager:
        return False
    _producer_warmed = True
    try:
        app.finalize(auto=True)  # task proxies resolve on first use otherwise
        app.backend  # noqa: B018 - the result backend is built on first access
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
            producer.maybe_declare(app.amqp.queues[app.conf.task_default_queue])
    except Exception as exc:  # noqa: BLE001 - any broker failure is the same here
        logger.warning("could not warm the broker connection: %s", exc)
        return False
    return True


def _worker_priority(**_: object) -> None:
    """Before the pool starts: the worker yields the CPU to web requests and embeds
    with its own thread count (``MNEMO_WORKER_NICE``,
    ``MNEMO_WORKER_EMBEDDING_THREADS``, ``MNEMO_WORKER_EMBEDDING_RUNS``,
    ``MNEMO_WORKER_EMBEDDING_IDLE``).

    On a small machine web and worker share the cores; a write or recall that waited
    behind an embedding batch made the write API's p95 2-4x its median. Niced, the
    worker gets every cycle the web leaves idle, which is where ingest runs anyway
    (docs/benchmarks.md, session 6). Pool children inherit both.
    """
    from django.conf import settings

    from memory import embeddings

    nice = int(getattr(settings, "MNEMO_WORKER_NICE", 0))
    if nice > 0:
        with contextlib.suppress(OSError):
            os.nice(nice)
    threads = int(getattr(settings, "MNEMO_WORKER_EMBEDDING_THREADS", 0))
    if threads > 0:
        embeddings.set_process_threads(threads)
    runs = int(getattr(settings, "MNEMO_WORKER_EMBEDDING_RUNS", 1))
    idle = bool(getattr(settings, "MNEMO_WORKER_EMBEDDING_IDLE", False))
    embeddings.set_process_runs(runs, idle=idle)


def close_old_connections_around_task(task: object = None, **_: object) -> None:
    """Before and after a worker's task, what Django does around a request: close a
    connection older than ``CONN_MAX_AGE``, one whose health check fails or one left
    outside autocommit; the next query opens a new one.

    Celery's fix-up would close it always; with ``CELERY_DB_REUSE_MAX`` it closes it
    only every so many tasks, and this keeps a broken one from failing the tasks in
    between. Not for eager tasks: they run inside the caller's transaction.
    """
    if getattr(getattr(task, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()


from celery.signals import (  # noqa: E402
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
)

task_prerun.connect(close_old_connections_around_task, weak=False)
task_postrun.connect(close_old_connections_around_task, weak=False)
worker_init.connect(_worker_priority, weak=False)
worker_ready.connect(_warm_in_main_process, weak=False)
worker_process_init.connect(warm_embedding_model, weak=False)


def solo_worker_argv() -> list[str]:
    """The command of one quiet, single-process worker of this app, as the bench and
    the worker tests start it (no heartbeat, gossip or mingle: nothing to talk to)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--pool=solo",
        "--loglevel=WARNING",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]
