import logging

from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "Telemetry"

    def ready(self) -> None:
        # Registers compute_reliability_24h and prune_logs (spec 06 §3.1).
        from telemetry import jobs  # noqa: F401
        from telemetry.sanitize import AccessLogRedactingFilter

        # spec 08 §5.4: uvicorn's access log keeps its own handler and format (a
        # LOGGING entry would replace them), so its filter is added here
        access = logging.getLogger("uvicorn.access")
        if not any(isinstance(f, AccessLogRedactingFilter) for f in access.filters):
            access.addFilter(AccessLogRedactingFilter())
