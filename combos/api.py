"""The control-plane REST API (spec 01 "Control-plane REST API").

Each resource speaks the YAML shape of spec 07 (plus ``id``) and writes through the
same services, and so the same validator, as the admin and ``import_config``.
Staff session or admin token; secrets are write-only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

from django.db import transaction
from django.db.models import Model
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from combos import change_history, services
from combos.api_errors import problems_response
from combos.config_export import _connection, _key, _model, _proxy
from combos.models import (
    ApiKey,
    CandidateOverride,
    Combo,
    ModelComboMapping,
    SmartRoute,
)
from providers import services as provider_services
from providers.connection_recheck import stored_connection_problems
from providers.health import board, connection_key, health_view
from providers.models import Connection, Provider, ProviderModel
from providers.validation import (
    CREDENTIAL_SECRETS,
    SECRET_ROUTING_SETTINGS,
    UNSTORABLE_MESSAGE,
    Checker,
    Problem,
    unstorable_path,
    validate_connection,
    validate_provider,
)

_SCHEMA = extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
_BY_ID = extend_schema(
    request=OpenApiTypes.OBJECT,
    responses=OpenApiTypes.OBJECT,
    parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
)
_ALL = {
    **dict.fromkeys(("list", "create"), _SCHEMA),
    **dict.fromkeys(("retrieve", "update", "partial_update", "destroy"), _BY_ID),
}
SECRETS_PERMISSION = "providers.change_provider"  # spec 08 §5.3


def _redirects_secrets(new: Any, old: Any) -> bool:
    """True when ``new`` settings send a credential somewhere ``old`` did not (an
    Entra ``authority_host``): changed like a secret (spec 08 §5.3)."""
    new, old = new or {}, old or {}
    return any(
        new.get(name) is not None and new.get(name) != old.get(name)
        for name in SECRET_ROUTING_SETTINGS
    )


def _require_secrets_permission(request: Request, what: str) -> None:
    if not request.user.has_perm(SECRETS_PERMISSION):
        raise exceptions.PermissionDenied(
            f"changing {what} needs the {SECRETS_PERMISSION} permission"
        )


def _warning(result: services.SaveResult, code: str) -> dict[str, Any] | None:
    for warning in result.warnings:
        if warning.message.startswith(code):
            return {"code": code, **_shadow_detail(warning.message)}
    return None


def _shadow_detail(message: str) -> dict[str, str | None]:
    # "CODE: name (provider/model)"; a shadowed combo is "(/combo)", no provider.
    inside = message.rpartition("(")[2].rstrip(")")
    provider, _, model = inside.partition("/")
    return {"modelId": model or inside, "providerId": provider or None}


@extend_schema_view(**_ALL)
class ConfigViewSet(viewsets.ViewSet):
    model: ClassVar[type[Model]]
    warning_code: ClassVar[str | None] = None

    def to_data(self, instance: Any) -> dict[str, Any]:
        raise TypeError(f"{type(self).__name__} must define to_data()")

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        raise TypeError(f"{type(self).__name__} must define save()")

    def remove(self, instance: Any) -> None:
        services.delete_instance(instance)

    def _get(self, pk: str | None) -> Any:
        if pk is None or not pk.isascii() or not pk.isdigit():  # a 404, not a 500
            raise Http404
        return get_object_or_404(self.model, pk=pk)

    def _out(self, instance: Any) -> dict[str, Any]:
        return {"id": instance.pk, **self.to_data(instance)}

    def list(self, request: Request) -> Response:
        return Response([self._out(i) for i in self.model._default_manager.all()])

    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        return Response(self._out(self._get(pk)))

    def _write(self, data: Any, instance: Any | None, code: int) -> Response:
        if not isinstance(data, dict):
            return problems_response([Problem("", "body must be a JSON object")])
        bad = unstorable_path(data)
        if bad is not None:  # a 400 naming it, not a database error
            return problems_response([Problem(bad, UNSTORABLE_MESSAGE)])
        before = None if instance is None else change_history.snapshot(instance)
        try:
            with transaction.atomic():
                result = self.save(dict(data), instance)
                # the History page of the row shows the edit, field by field
                change_history.record_one(
                    self.request.user, change_history.REST_API, result.instance, before
                )
        except services.ConfigInvalid as exc:
            return problems_response(exc.problems)
        body = self._out(result.instance)
        if result.plaintext_key:
            body["key"] = result.plaintext_key
        if self.warning_code:
            warning = _warning(result, self.warning_code)
            if warning is not None:
                body["warning"] = warning
        return Response(body, status=code)

    def create(self, request: Request) -> Response:
        return self._write(request.data, None, status.HTTP_201_CREATED)

    def update(self, request: Request, pk: str | None = None) -> Response:
        return self._write(request.data, self._get(pk), status.HTTP_200_OK)

    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        instance = self._get(pk)
        if not isinstance(request.data, dict):
            return problems_response([Problem("", "body must be a JSON object")])
        merged = {**self.to_data(instance), **request.data}
        return self._write(merged, instance, status.HTTP_200_OK)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        instance = self._get(pk)
        text, key = str(instance), instance.pk
        try:
            with transaction.atomic():
                self.remove(instance)
                change_history.record_deletion(
                    request.user, change_history.REST_API, self.model, key, text
                )
        except services.ComboInUse as exc:
            return problems_response([Problem("", str(exc))], status=409)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ComboViewSet(ConfigViewSet):
    model = Combo
    warning_code = "COMBO_NAME_SHADOWS_MODEL"

    def to_data(self, instance: Any) -> dict[str, Any]:
        return services.combo_as_data(instance)

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        return services.save_combo(data, instance)

    def remove(self, instance: Any) -> None:
        services.delete_combo(instance)


class MappingViewSet(ConfigViewSet):
    model = ModelComboMapping

    def to_data(self, instance: Any) -> dict[str, Any]:
        return {
            "pattern": instance.pattern,
            "combo": instance.combo.name,
            "priority": instance.priority,
        }

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        return services.save_mapping(data, instance)


class ApiKeyViewSet(ConfigViewSet):
    model = ApiKey

    def to_data(self, instance: Any) -> dict[str, Any]:
        data = _key(instance)
        data.pop("key", None)
        data["prefix"] = instance.prefix
        return data

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        data.pop("prefix", None)
        return services.save_api_key(data, instance)

    def remove(self, instance: Any) -> None:
        services.delete_api_key(instance)


class OverrideViewSet(ConfigViewSet):
    model = CandidateOverride

    def to_data(self, instance: Any) -> dict[str, Any]:
        return {
            "api_key": instance.api_key.name,
            "channel": instance.channel,
            "exclude": list(instance.exclude),
        }

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        return services.save_override(data, instance)


class SmartRouteViewSet(ConfigViewSet):
    model = SmartRoute
    warning_code = "SMART_ALIAS_SHADOWS_MODEL"

    def to_data(self, instance: Any) -> dict[str, Any]:
        return {
            "alias": instance.alias,
            "easy": instance.easy,
            "hard": instance.hard,
            "threshold": instance.threshold,
            "session_ttl_seconds": instance.session_ttl_seconds,
        }

    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        return services.save_smart_route(data, instance)


def _checked(data: dict[str, Any], fn: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    check = Checker("")
    clean = fn(data, check)
    if check.problems:
        raise services.ConfigInvalid(check.problems)
    return clean


def _check_kept_connections(
    provider: Provider, clean: dict[str, Any], *, nested: bool
) -> None:
    """The stored connections a provider keeps must suit its new kind and settings
    (issue #14); those the body names are checked with it already."""
    problems = stored_connection_problems(
        provider,
        kind=clean["kind"],
        settings=clean["settings"],
        skip={c["name"] for c in clean["connections"]} if nested else (),
    )
    if problems:
        raise services.ConfigInvalid(problems)


class ProviderViewSet(ConfigViewSet):
    model = Provider

    def to_data(self, instance: Any) -> dict[str, Any]:
        return {
            "slug": instance.slug,
            "kind": instance.kind,
            "base_url": instance.base_url,
            "wire": instance.wire,
            **({"preset": instance.preset} if instance.preset else {}),
            **dict(instance.settings or {}),
            **_proxy(instance),
            "models": [_model(m) for m in instance.models.all()],
        }

    @transaction.atomic
    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        clean = _checked(data, validate_provider)
        clash = Provider.objects.filter(slug__iexact=clean["slug"])
        if instance is not None:
            clash = clash.exclude(pk=instance.pk)
        if clash.exists():
            raise services.ConfigInvalid([Problem("slug", "already exists")])
        if instance is not None:
            _check_kept_connections(instance, clean, nested="connections" in data)
        old_url = instance.base_url if instance is not None else ""
        if clean["base_url"] != old_url:
            _require_secrets_permission(self.request, "a provider's base_url")
        provider = instance or Provider()
        provider.slug, provider.kind = clean["slug"], clean["kind"]
        provider.base_url = clean["base_url"]
        provider.wire = clean["wire"]
        provider.preset = clean["preset"] or ""
        if _redirects_secrets(clean["settings"], provider.settings):
            _require_secrets_permission(self.request, "a provider's authority_host")
        provider.settings = dict(clean["settings"])
        proxy = clean["proxy_url"]
        if proxy not in (provider_services.MASKED, provider.proxy_url):
            _require_secrets_permission(self.request, "a provider's proxy")
            provider.set_proxy_url(proxy)
        provider_services.save_provider(provider)
        if "models" in data:
            keep = []
            for position, item in enumerate(clean["models"]):
                row = ProviderModel.objects.filter(
                    provider=provider, model_id=item["id"]
                ).first() or ProviderModel(provider=provider, model_id=item["id"])
                provider_services.apply_model_fields(row, item)
                row.position = position
                provider_services.save_model(row)
                keep.append(item["id"])
            ProviderModel.objects.filter(provider=provider).exclude(
                model_id__in=keep
            ).delete()
        # nested connections (the YAML shape) are upserted by name; the others stay
        for item in clean["connections"] if "connections" in data else ():
            if item.get("api_key") or item.get("secrets"):
                _require_secrets_permission(self.request, "a connection's secret")
            connection = Connection.objects.filter(
                provider=provider, name=item["name"]
            ).first() or Connection(provider=provider, name=item["name"])
            if _redirects_secrets(item.get("credential_settings"), connection.settings):
                _require_secrets_permission(self.request, "a connection's secret")
            provider_services.apply_connection_fields(connection, item)
            provider_services.save_connection(connection)
        return services.SaveResult(provider)

    def remove(self, instance: Any) -> None:
        provider_services.delete_provider(instance)


class ConnectionViewSet(ConfigViewSet):
    model = Connection

    def to_data(self, instance: Any) -> dict[str, Any]:
        data = _connection(instance)
        data.pop("api_key", None)  # write-only
        for name in CREDENTIAL_SECRETS:  # write-only, in any form (spec 10 §3)
            data.pop(name, None)
        data["provider"] = instance.provider.slug
        data["has_api_key"] = instance.has_api_key
        data["secrets_set"] = instance.secret_names()
        return data

    def _out(self, instance: Any) -> dict[str, Any]:
        return {**super()._out(instance), "health": health_view(instance)}

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"], url_path="reset-health")
    def reset_health(self, request: Request, pk: str | None = None) -> Response:
        """Forget the breaker, cooldown, auth disable and model locks of one account."""
        connection = self._get(pk)
        board.reset(connection_key(connection.provider.slug, connection.name))
        return Response(self._out(connection))

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @action(detail=False, methods=["post"], url_path="reset-health")
    def reset_all_health(self, request: Request) -> Response:
        """Forget the health state of every connection (this process)."""
        count = 0
        for connection in Connection.objects.select_related("provider"):
            board.reset(connection_key(connection.provider.slug, connection.name))
            count += 1
        return Response({"reset": count})

    @transaction.atomic
    def save(self, data: dict[str, Any], instance: Any | None) -> services.SaveResult:
        slug = data.pop("provider", None)
        data.pop("has_api_key", None)
        data.pop("secrets_set", None)
        provider = (
            Provider.objects.filter(slug__iexact=str(slug)).first() if slug else None
        )
        if provider is None:
            raise services.ConfigInvalid(
                [Problem("provider", f"unknown provider {slug!r}")]
            )
        if instance is not None:
            # a stored secret counts as given (its value is never shown), as in
            # the admin: an update that leaves it out keeps it (spec 10 §3); so
            # does a stored api_key (checked against a new provider's kind, #14)
            for name in instance.secret_names():
                data.setdefault(name, provider_services.MASKED)
            if instance.has_api_key and data.get("api_key") is None:
                data["api_key"] = provider_services.MASKED
        clean = _checked(
            data,
            functools.partial(
                validate_connection,
                kind=provider.kind,
                provider_settings=provider.settings or {},
            ),
        )
        changes_secret = any(
            value != provider_services.MASKED for value in clean["secrets"].values()
        )
        if changes_secret or (
            clean["api_key"] is not None
            and clean["api_key"] != provider_services.MASKED
        ):
            # setting, replacing or clearing ("") a secret
            _require_secrets_permission(self.request, "a connection's secret")
        if instance is not None and instance.provider_id != provider.pk:
            # the secret would go to another host (spec 08 §5.3)
            _require_secrets_permission(self.request, "a connection's provider")
        if _redirects_secrets(
            clean["credential_settings"], instance.settings if instance else None
        ):
            _require_secrets_permission(self.request, "a connection's authority_host")
        connection = instance or Connection(provider=provider, name=clean["name"])
        clash = Connection.objects.filter(provider=provider, name=clean["name"])
        if instance is not None:
            clash = clash.exclude(pk=instance.pk)
        if clash.exists():
            raise services.ConfigInvalid([Problem("name", "already exists")])
        connection.provider, connection.name = provider, clean["name"]
        provider_services.apply_connection_fields(connection, clean)
        provider_services.save_connection(connection)
        if changes_secret or (
            clean["api_key"] and clean["api_key"] != provider_services.MASKED
        ):
            # spec 03 §8.3: saving credentials clears an auth disable (here at once;
            # other workers when their table shows a changed secret)
            board.reenable(connection_key(provider.slug, connection.name))
        return services.SaveResult(connection)

    def remove(self, instance: Any) -> None:
        provider_services.delete_connection(instance)
