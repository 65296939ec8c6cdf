from django.apps import AppConfig


class CombosConfig(AppConfig):
    name = "combos"
    verbose_name = "Routing"
