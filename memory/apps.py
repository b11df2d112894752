from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from config.celery import warm_producer
        from config.heap import freeze_once

        # After the first request that loaded the models, full GC passes stop
        # walking them (config/heap.py).
        request_finished.connect(freeze_once, dispatch_uid="mnemo-gc-freeze")
        # ... and the broker connection is opened before a write needs it.
        request_finished.connect(warm_producer, dispatch_uid="mnemo-warm-producer")
