from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Providers"

    def ready(self) -> None:
        from providers import checks  # noqa: F401  (registers system checks)
        from providers.entra import register as register_entra

        register_entra()  # the azure kind's Entra tokens (spec 10 §3)
