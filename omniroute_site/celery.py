"""The Celery application: broker from ``REDIS_URL``; tasks autodiscovered per app.

The scheduled jobs (spec 06 §3) register their beat entries in settings
(``CELERY_BEAT_SCHEDULE``); without a broker, ``manage.py run_jobs`` runs them.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_site.settings")

app = Celery("omniroute_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
