from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "Telemetry"

    def ready(self) -> None:
        # Registers compute_reliability_24h and prune_logs (spec 06 §3.1).
        from telemetry import jobs  # noqa: F401
