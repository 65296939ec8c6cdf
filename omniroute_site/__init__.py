"""OmniRoute site wiring.

The Celery app is loaded with Django so that ``shared_task`` messages sent by the web
process (webhook deliveries) use the configured broker, not Celery's default.
"""

from omniroute_site.celery import app as celery_app

__all__ = ("celery_app",)
