import logging

from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "Telemetry"

    def ready(self) -> None:
        from telemetry import (
            jobs,  # noqa: F401 - registers compute_reliability_24h and prune_logs
            tasks,
            webhook_delivery,
        )
        from telemetry.sanitize import AccessLogRedactingFilter

        # spec 06 §3.1 jobs registered above.  The delivery service sends the Celery
        # task that wraps it, so the task is handed down to it here.
        webhook_delivery.send_through(tasks.deliver_webhook_task)

        # spec 08 §5.4: uvicorn's access log keeps its own handler and format (a
        # LOGGING entry would replace them), so its filter is added here
        access = logging.getLogger("uvicorn.access")
        if not any(isinstance(f, AccessLogRedactingFilter) for f in access.filters):
            access.addFilter(AccessLogRedactingFilter())
