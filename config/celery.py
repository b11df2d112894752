"""Celery application: Redis broker when CELERY_BROKER_URL is set, eager otherwise."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("mnemo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
