from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Upstreams"  # as the sidebar groups it; not "Providers › Providers"

    def ready(self) -> None:
        from providers import (
            checks,  # noqa: F401  (registers system checks)
            credential_sources,
            vertex_auth,
        )
        from providers.aws_credentials import AwsDefaultChain
        from providers.entra import register as register_entra

        register_entra()  # the azure kind's Entra tokens (spec 10 §3)
        credential_sources.MINTERS.setdefault("vertex", vertex_auth.MINTER)
        # the bedrock kind's default AWS credential chain (spec 10 §3)
        credential_sources.MINTERS.setdefault("bedrock", AwsDefaultChain())
