from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Gateway"

    def ready(self) -> None:
        from gateway import checks  # noqa: F401  (registers system checks)
        from gateway.config.state import report_shared_state

        report_shared_state()  # Redis fallbacks and health -> Prometheus
