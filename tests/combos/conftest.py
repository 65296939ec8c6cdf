"""Builders for control-plane tests: providers, combos, keys, personas and clients.

Rows are written through the same services the admin, the REST API and
``import_config`` use, so a builder never creates a row those paths would refuse.
The default world is the one of spec 03 §10: providers ``pa`` (connections ``main``
and ``backup``), ``pb`` and ``pc`` (connection ``main``), models ``pa/m1``,
``pb/m2`` and ``pc/m3``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from combos import services
from combos.api_auth import issue_admin_token
from combos.config_file import ConfigFileError, ImportReport, import_config
from combos.models import ApiKey, Combo
from providers.models import Connection, Provider, ProviderModel


@pytest.fixture
def make_provider() -> Callable[..., Provider]:
    def make(
        slug: str = "pa",
        *,
        kind: str = "openai",
        base_url: str = "http://127.0.0.1:9/v1",
        connections: tuple[str, ...] = ("main",),
        models: tuple[str, ...] = ("m1",),
        api_key: str | None = None,
    ) -> Provider:
        provider = Provider.objects.create(slug=slug, kind=kind, base_url=base_url)
        for priority, name in enumerate(connections):
            connection = Connection(provider=provider, name=name, priority=priority)
            connection.set_api_key(api_key)
            connection.save()
        for position, model_id in enumerate(models):
            ProviderModel.objects.create(
                provider=provider, model_id=model_id, position=position
            )
        return provider

    return make


@pytest.fixture
def world(make_provider: Callable[..., Provider]) -> dict[str, Provider]:
    return {
        "pa": make_provider("pa", connections=("main", "backup"), models=("m1",)),
        "pb": make_provider("pb", connections=("main",), models=("m2",)),
        "pc": make_provider("pc", connections=("main",), models=("m3",)),
    }


@pytest.fixture
def make_combo() -> Callable[..., Combo]:
    def make(
        name: str = "team",
        *,
        strategy: str = "priority",
        targets: list[dict[str, Any]] | None = None,
        config: dict[str, Any] | None = None,
        active: bool = True,
    ) -> Combo:
        data = {
            "name": name,
            "strategy": strategy,
            "active": active,
            "targets": [{"model": "pa/m1"}] if targets is None else targets,
            "config": config or {},
        }
        return services.save_combo(data).instance

    return make


@pytest.fixture
def make_api_key() -> Callable[..., tuple[ApiKey, str | None]]:
    def make(name: str = "ci", **fields: Any) -> tuple[ApiKey, str | None]:
        result = services.save_api_key({"name": name, **fields})
        return result.instance, result.plaintext_key

    return make


@pytest.fixture
def superuser(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_superuser(
        "root", "root@example.com", "pw-root"
    )


@pytest.fixture
def staff_user(django_user_model: type[User]) -> User:
    """Staff without any model permission."""
    return django_user_model.objects.create_user(
        "staff", "staff@example.com", "pw-staff", is_staff=True
    )


#: the apps whose models the REST API edits (spec 08 §5.3)
CONFIG_APPS = ("combos", "providers")


@pytest.fixture
def operator_user(django_user_model: type[User]) -> User:
    """Staff with every permission on the configuration models but
    ``providers.change_provider`` (secrets, base URLs and provider moves)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(
        "operator", "operator@example.com", "pw-operator", is_staff=True
    )
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label__in=CONFIG_APPS).exclude(
            codename="change_provider"
        )
    )
    return user


@pytest.fixture
def operator_client(operator_user: User) -> Client:
    client = Client()
    client.force_login(operator_user)
    return client


@pytest.fixture
def plain_user(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("plain", "plain@example.com", "pw")


@pytest.fixture
def superuser_client(superuser: User) -> Client:
    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def staff_client(staff_user: User) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture
def anonymous_client() -> Client:
    return Client()


@pytest.fixture
def token_client(superuser: User) -> Client:
    """The REST API with an admin token instead of a session."""
    token = issue_admin_token(superuser, "tests")
    return Client(headers={"authorization": f"Bearer {token}"})


# ---------------------------------------------------------------- config files

SPEC07_EXAMPLE = Path(__file__).parent / "fixtures" / "spec07_example.yaml"
SMALL_LITERAL_KEY = "sk-or-small-literal-key-000000000000"


@pytest.fixture
def spec07_yaml() -> str:
    """The spec 07 example, completed so every reference resolves."""
    return SPEC07_EXAMPLE.read_text("utf-8")


@pytest.fixture
def small_config() -> Callable[[], dict[str, Any]]:
    """A fresh, valid config (as parsed YAML) with one of every kind of row."""

    def make() -> dict[str, Any]:
        return {
            "providers": [
                {
                    "slug": "pa",
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "connections": [{"name": "main", "api_key": "env:PA_KEY"}],
                    "models": [{"id": "m1", "tier": "fast"}],
                },
                {
                    "slug": "pb",
                    "kind": "anthropic",
                    "base_url": "http://127.0.0.1:9/v1",
                    "connections": [{"name": "main", "api_key": "pb-literal-1234"}],
                    "models": [{"id": "m2"}],
                },
            ],
            "combos": [
                {
                    "name": "team",
                    "strategy": "priority",
                    "targets": [{"model": "pa/m1"}, {"model": "pb/m2"}],
                    "config": {},
                }
            ],
            "model_combo_mappings": [{"pattern": "gpt-*", "combo": "team"}],
            "api_keys": [
                {
                    "name": "ci",
                    "key": SMALL_LITERAL_KEY,
                    "failover_defaults": {"models": ["pa/m1"]},
                }
            ],
            "candidate_overrides": [
                {"api_key": "ci", "channel": "coding", "exclude": ["pa/m1@main"]}
            ],
            "smart_routes": [{"alias": "normal", "easy": "pa/m1", "hard": "team"}],
            "settings": {"breaker": {"open_seconds": 30}},
        }

    return make


@pytest.fixture
def import_data() -> Callable[..., ImportReport]:
    """Import a parsed config (dumped to YAML first) or a YAML text."""

    def run(data: dict[str, Any] | str, *, prune: bool = False) -> ImportReport:
        text = data if isinstance(data, str) else yaml.safe_dump(data)
        return import_config(text, prune=prune)

    return run


@pytest.fixture
def import_problems() -> Callable[..., list[str]]:
    """The problems an import reports (``[]`` when it succeeds)."""

    def run(data: dict[str, Any] | str, *, prune: bool = False) -> list[str]:
        text = data if isinstance(data, str) else yaml.safe_dump(data)
        try:
            import_config(text, prune=prune)
        except ConfigFileError as exc:
            return [str(p) for p in exc.problems]
        return []

    return run


@pytest.fixture
def combo_problems() -> Callable[..., list[str]]:
    """The problems ``save_combo`` reports for ``data`` (``[]`` when it saves)."""

    def run(data: dict[str, Any], instance: Combo | None = None) -> list[str]:
        try:
            services.save_combo(data, instance)
        except services.ConfigInvalid as exc:
            return [str(p) for p in exc.problems]
        return []

    return run


@pytest.fixture
def key_problems() -> Callable[..., list[str]]:
    """The problems ``save_api_key`` reports for ``data`` (``[]`` when it saves)."""

    def run(data: dict[str, Any], instance: ApiKey | None = None) -> list[str]:
        try:
            services.save_api_key(data, instance)
        except services.ConfigInvalid as exc:
            return [str(p) for p in exc.problems]
        return []

    return run
