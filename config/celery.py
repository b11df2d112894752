"""Celery application: Redis broker when CELERY_BROKER_URL is set, eager otherwise."""

import contextlib
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

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


def _warm_in_main_process(sender: object = None, **kwargs: object) -> None:
    """Solo / thread pools run tasks in the main process: warm it (prefork children
    warm themselves through ``worker_process_init``)."""
    pool_cls = getattr(getattr(sender, "controller", None), "pool_cls", None)
    if "prefork" not in getattr(pool_cls, "__module__", "prefork"):
        warm_embedding_model()


from celery.signals import worker_process_init, worker_ready  # noqa: E402

worker_ready.connect(_warm_in_main_process, weak=False)
worker_process_init.connect(warm_embedding_model, weak=False)
