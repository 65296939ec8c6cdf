"""The ``combos`` app. Its ``ready()`` loads the custom router strategies.

``OMNIROUTE_ROUTER_STRATEGY_MODULES`` names modules that register strategies with
``gateway.auto.engine.register_router_strategy`` when imported (spec 04 §8). They load
here because every process (ASGI workers, Celery, ``manage.py import_config``) runs
``django.setup()`` before it validates any config, and the combo validator accepts a
``routerStrategy`` only if it is registered by then. A module that cannot be imported
is a configuration error (``ImproperlyConfigured`` naming the module and the
variable) and stops start-up; an error raised by the module's own code propagates
as it is, with a note naming the module.
"""

from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def load_router_strategy_modules() -> None:
    """Import every module of ``settings.OMNIROUTE_ROUTER_STRATEGY_MODULES``."""
    from gateway.auto.engine.routers import load_strategy_modules

    try:
        load_strategy_modules(settings.OMNIROUTE_ROUTER_STRATEGY_MODULES)
    except ImportError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


class CombosConfig(AppConfig):
    name = "combos"
    verbose_name = "Routing"

    def ready(self) -> None:
        load_router_strategy_modules()
