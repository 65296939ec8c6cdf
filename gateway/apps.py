from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Gateway"

    def ready(self) -> None:
        from gateway import checks  # noqa: F401  (registers system checks)
        from gateway.config.state import report_shared_state

        report_shared_state()  # Redis fallbacks and health -> Prometheus
        from django.contrib import admin

        # issue #15: the console's own names (the theme's header is in settings.UNFOLD)
        admin.site.site_header = admin.site.site_title = "OmniRoute"
        admin.site.index_title = "Dashboard"
        from gateway.ops import admin_display

        admin_display.install()  # one time format, no raw null
