"""Admin for providers, connections (secrets write-only) and the model catalog."""

from __future__ import annotations

import logging
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from unfold.admin import ModelAdmin, TabularInline

from gateway.dialects import REGISTRY
from providers import (
    admin_arena,  # noqa: F401 - registers the Arena score and alias admins
    admin_jobs,  # noqa: F401 - registers the job and catalog admins
    services,
)
from providers.health import board, connection_key, health_view
from providers.models import Connection, Provider, ProviderModel
from providers.validation import (
    ALL_WIRES,
    CAPABILITIES,
    CREDENTIAL_SECRETS,
    CREDENTIAL_SETTINGS,
    DEPLOYMENT_KINDS,
    SECRET_ROUTING_SETTINGS,
    Checker,
    validate_connection,
    validate_model,
)

logger = logging.getLogger(__name__)

SECRET_HELP = (
    "Write-only. A literal key (stored encrypted) or env:NAME (read from the "
    "gateway's environment). Leave empty to keep the stored value."
)


def _apply_problems(
    form: forms.BaseForm, check: Checker, mapping: dict[str, str]
) -> None:
    djangos = set(form.errors)  # fields Django's own checks already flagged
    for problem in check.problems:
        field = mapping.get(problem.path, problem.path.split(".")[0].split("[")[0])
        target = field if field in form.fields else None
        if target is not None and target in djangos:
            continue  # Django's own message for the field says it already
        form.add_error(target, problem.message if target else str(problem))


def _bool_setting(value: str) -> Any:
    """A typed setting from the form's text: true/false as booleans."""
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    return value


def credential_fields(kind: str | None) -> tuple[list[str], list[str]]:
    """The secret and plain credential fields a connection of ``kind`` shows (spec
    10 §3); every kind's when the kind is not known yet (a new connection)."""
    if kind is not None and kind in REGISTRY:
        shape = REGISTRY[kind].credentials
        return list(shape.secrets), list(shape.settings)
    return sorted(CREDENTIAL_SECRETS), sorted(CREDENTIAL_SETTINGS)


class _ConnectionForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        strip=True,
        help_text=SECRET_HELP,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove stored key")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.instance.settings if self.instance.pk else {}
        for name in CREDENTIAL_SETTINGS:
            if name in self.fields and isinstance(settings, dict) and name in settings:
                value = settings[name]
                self.fields[name].initial = (
                    str(value).lower() if isinstance(value, bool) else value
                )

    class Meta:
        model = Connection
        fields = (
            "name",
            "api_key",
            "clear_api_key",
            "tier",
            "default_model",
            "active",
            "priority",
            "max_concurrency",
            "quota_remaining_percent",
            "quota_reset_interval_seconds",
        )

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())
        quota = {
            k: v
            for k, v in (
                ("remaining_percent", data.get("quota_remaining_percent")),
                ("reset_interval_seconds", data.get("quota_reset_interval_seconds")),
            )
            if v is not None
        }
        check = Checker("")
        provider = data.get("provider") or getattr(self.instance, "provider", None)
        kind = provider.kind if isinstance(provider, Provider) else None
        secrets, settings = credential_fields(kind)
        given = {n: data[n] for n in secrets if data.get(n)}
        if self.instance.pk and not data.get("clear_secrets"):
            # a stored field counts as given (its value is never shown)
            stored = {
                *(self.instance.secret_refs or {}),
                *self.instance.stored_secrets(),
            }
            given = {**dict.fromkeys(stored & set(secrets), "***"), **given}
        stored_settings = self.instance.settings if self.instance.pk else {}
        typed = {
            n: (
                _bool_setting(data[n])
                if n in self.fields
                else (stored_settings or {}).get(n)
            )
            for n in settings
            if (data.get(n) if n in self.fields else (stored_settings or {}).get(n))
            not in (None, "")
        }
        self.credential = (given, typed)
        validate_connection(
            {
                "name": data.get("name"),
                "api_key": data.get("api_key") or None,
                "tier": data.get("tier"),
                "default_model": data.get("default_model") or None,
                "active": bool(data.get("active")),
                "priority": data.get("priority") or 0,
                "max_concurrency": data.get("max_concurrency") or 0,
                **({"quota": quota} if quota else {}),
                **typed,
                **given,
            },
            check,
            kind=kind,
            provider_settings=provider.settings
            if isinstance(provider, Provider)
            else {},
        )
        _apply_problems(
            self,
            check,
            {
                "quota.remaining_percent": "quota_remaining_percent",
                "quota.reset_interval_seconds": "quota_reset_interval_seconds",
            },
        )
        return data

    def save(self, commit: bool = True) -> Connection:
        connection: Connection = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            connection.set_api_key(None)
        elif self.cleaned_data.get("api_key"):
            connection.set_api_key(self.cleaned_data["api_key"])
        given: dict[str, str]
        typed: dict[str, Any]
        given, typed = getattr(self, "credential", ({}, {}))
        if any(name in self.fields for name in CREDENTIAL_SETTINGS):
            connection.settings = typed
        if self.cleaned_data.get("clear_secrets"):
            stored = {*(connection.secret_refs or {}), *connection.stored_secrets()}
            connection.set_secrets(dict.fromkeys(stored))
        connection.set_secrets(given)
        if commit:
            services.save_connection(connection)
        return connection

    @property
    def changes_secret(self) -> bool:
        given: dict[str, str] = getattr(self, "credential", ({}, {}))[0]
        return bool(
            self.cleaned_data.get("api_key")
            or self.cleaned_data.get("clear_secrets")
            or any(value != "***" for value in given.values())
        )


def _credential_form_fields() -> dict[str, forms.Field]:
    """One write-only field per secret of every kind, one text field per plain
    setting (spec 10 §3); the admin shows a connection its kind's only."""
    found: dict[str, forms.Field] = {}
    for name in sorted(CREDENTIAL_SECRETS):
        widget: forms.Widget = (
            forms.Textarea(attrs={"rows": 4, "autocomplete": "off"})
            if name.endswith("_json")
            else forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"})
        )
        found[name] = forms.CharField(
            required=False, strip=True, help_text=SECRET_HELP, widget=widget
        )
    for name in sorted(CREDENTIAL_SETTINGS):
        found[name] = forms.CharField(required=False, strip=True, max_length=500)
    if found:
        found["clear_secrets"] = forms.BooleanField(
            required=False, label="Remove the stored credential fields"
        )
    return found


ConnectionForm: Any = forms.models.ModelFormMetaclass(
    "ConnectionForm",
    (_ConnectionForm,),
    {"__module__": __name__, **_credential_form_fields()},
)


class ProviderModelForm(forms.ModelForm):
    capabilities = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=[(c, c) for c in CAPABILITIES],
        help_text="Leave all unchecked for 'unknown' (never filtered out).",
    )
    wire = forms.ChoiceField(
        required=False,
        choices=[("", "the provider's"), *((w, w) for w in ALL_WIRES)],
        help_text="A Responses-only model of an OpenAI-compatible provider: responses.",
    )

    class Meta:
        model = ProviderModel
        fields = (
            "model_id",
            "position",
            "input_cost",
            "output_cost",
            "cache_read_cost",
            "cache_write_cost",
            "context_window",
            "max_output_tokens",
            "capabilities",
            "tier",
            "wire",
            "deployment",
        )

    def clean_capabilities(self) -> list[str] | None:
        return list(self.cleaned_data.get("capabilities") or []) or None

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())
        check = Checker("")
        payload = {
            k: data.get(k)
            for k in (
                "input_cost",
                "output_cost",
                "cache_read_cost",
                "cache_write_cost",
                "context_window",
                "max_output_tokens",
                "capabilities",
            )
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        validate_model(
            {
                "id": data.get("model_id"),
                **payload,
                **({"tier": data["tier"]} if data.get("tier") else {}),
                **({"wire": data["wire"]} if data.get("wire") else {}),
                **(
                    {"deployment": data["deployment"]} if data.get("deployment") else {}
                ),
            },
            check,
        )
        kind = self.instance.provider.kind if self.instance.provider_id else None
        if data.get("deployment") and kind and kind not in DEPLOYMENT_KINDS:
            check.error("deployment", f"not a setting of kind '{kind}'")
        _apply_problems(self, check, {"id": "model_id"})
        return data


class ConnectionInline(TabularInline):
    model = Connection
    form = ConnectionForm
    extra = 0
    fields = (
        "name",
        "api_key",
        "tier",
        "active",
        "priority",
        "default_model",
        "max_concurrency",
        "health",
    )
    show_change_link = True
    readonly_fields = ("health",)

    @admin.display(description="health (this process)")
    def health(self, obj: Connection) -> str:
        if obj.pk is None:
            return "—"
        view = health_view(obj)
        parts = [f"circuit {view['circuit']}"]
        if view["cooldown_until"]:
            parts.append(f"cooldown until {view['cooldown_until']}")
        if view["auth_status"]:
            parts.append(f"{view['auth_status']} until {view['auth_disabled_until']}")
        if view["locked_models"]:
            parts.append("locked: " + ", ".join(view["locked_models"]))
        return "; ".join(parts)


class ProviderModelInline(TabularInline):
    model = ProviderModel
    form = ProviderModelForm
    extra = 0
    fields = (
        "model_id",
        "position",
        "input_cost",
        "output_cost",
        "context_window",
        "max_output_tokens",
        "tier",
        "wire",
        "deployment",
    )


class ProviderForm(forms.ModelForm):
    wire = forms.ChoiceField(
        choices=[(w, w) for w in ALL_WIRES],
        initial="chat",
        required=False,
        help_text="The upstream API of its models: chat (Chat Completions) or, for "
        "the OpenAI-compatible kind, responses (the Responses API).",
    )

    class Meta:
        model = Provider
        fields = ("slug", "kind", "base_url", "wire")

    def clean_wire(self) -> str:
        return self.cleaned_data.get("wire") or "chat"

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())
        check = Checker("")
        from providers.validation import validate_provider

        validate_provider(
            {
                k: data.get(k)
                for k in ("slug", "kind", "base_url", "wire")
                if data.get(k)
            },
            check,
        )
        _apply_problems(self, check, {})
        slug = data.get("slug")
        if isinstance(slug, str) and "slug" not in self.errors:
            # slugs resolve ignoring case (spec 03 §1), as REST and YAML check
            clash = Provider.objects.filter(slug__iexact=slug)
            if self.instance.pk:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                self.add_error("slug", f"a provider '{clash[0].slug}' already exists")
        return data


@admin.register(Provider)
class ProviderAdmin(ModelAdmin):
    form = ProviderForm
    list_display = ("slug", "kind", "base_url", "connection_count", "model_count")
    list_filter = ("kind",)
    search_fields = ("slug", "base_url")
    inlines = (ConnectionInline, ProviderModelInline)
    actions = ("list_upstream_models",)

    @admin.action(
        description="List upstream models (add the ones not configured yet)",
        permissions=["change"],
    )
    def list_upstream_models(self, request: HttpRequest, queryset: Any) -> Any:
        """Spec 10 §2: the upstream's models not configured yet (the page of
        ``gateway.ops.admin_probe``), for the first selected provider."""
        provider = queryset.first()
        return HttpResponseRedirect(
            reverse("admin-provider-discover", args=[provider.pk])
        )

    @admin.display(description="connections")
    def connection_count(self, obj: Provider) -> int:
        return obj.connections.count()

    @admin.display(description="models")
    def model_count(self, obj: Provider) -> int:
        return obj.models.count()

    def save_model(
        self, request: HttpRequest, obj: Provider, form: Any, change: bool
    ) -> None:
        services.save_provider(obj)

    def save_formset(
        self, request: HttpRequest, form: Any, formset: Any, change: bool
    ) -> None:
        super().save_formset(request, form, formset, change)
        services.bump_config_revision()

    def delete_model(self, request: HttpRequest, obj: Provider) -> None:
        services.delete_provider(obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset)
        services.bump_config_revision()


@admin.register(Connection)
class ConnectionAdmin(ModelAdmin):
    form = ConnectionForm
    list_display = (
        "__str__",
        "provider",
        "tier",
        "active",
        "priority",
        "secret",
        "default_model",
        "max_concurrency",
        "circuit",
        "cooldown",
        "auth_status",
        "locked_models",
    )
    list_filter = ("provider", "tier", "active")
    search_fields = ("name", "provider__slug", "default_model")
    list_select_related = ("provider",)
    readonly_fields = ("secret", "circuit", "cooldown", "auth_status", "locked_models")
    actions = ("reset_health", "reenable_now", "test_connection")

    @admin.action(description="Test connection", permissions=["change"])
    def test_connection(self, request: HttpRequest, queryset: Any) -> Any:
        """Spec 10 §2: one minimal request with each selected connection's
        credential (``gateway.ops.admin_probe``); no health is fed."""
        ids = ",".join(str(pk) for pk in queryset.values_list("pk", flat=True))
        return HttpResponseRedirect(
            reverse("admin-connection-test") + "?" + urlencode({"ids": ids})
        )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        health = ["circuit", "cooldown", "auth_status", "locked_models"] if obj else []
        secrets, settings = credential_fields(obj.provider.kind if obj else None)
        fields = [
            "provider",
            "secret",
            *health,
            *ConnectionForm.Meta.fields[:3],
            *secrets,
            *(["clear_secrets"] if secrets else []),
            *settings,
            *ConnectionForm.Meta.fields[3:],
        ]
        if not request.user.has_perm("providers.change_provider"):
            hidden = {"api_key", "clear_api_key", "clear_secrets", *secrets}
            hidden |= SECRET_ROUTING_SETTINGS  # where the secret goes
            fields = [f for f in fields if f not in hidden]
        return fields

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        kwargs["fields"] = [
            f for f in self.get_fields(request, obj) if f not in self.readonly_fields
        ]
        return super().get_form(request, obj, change, **kwargs)

    # Health state of this process (spec 03 §8): shown live, reset by the actions.

    @admin.display(description="circuit")
    def circuit(self, obj: Connection) -> str:
        view = health_view(obj)
        if view["circuit"] == "closed":
            return "closed"
        return f"{view['circuit']} until {view['open_until']}"

    @admin.display(description="rate-limit cooldown")
    def cooldown(self, obj: Connection) -> str:
        return health_view(obj)["cooldown_until"] or "—"

    @admin.display(description="auth")
    def auth_status(self, obj: Connection) -> str:
        view = health_view(obj)
        if not view["auth_status"]:
            return "ok"
        message = f": {view['auth_message']}" if view["auth_message"] else ""
        return f"{view['auth_status']} until {view['auth_disabled_until']}{message}"

    @admin.display(description="locked models")
    def locked_models(self, obj: Connection) -> str:
        locks = health_view(obj)["locked_models"]
        return ", ".join(f"{m} until {u}" for m, u in locks.items()) or "—"

    @admin.action(
        description="Reset health state (breaker, cooldown, auth, locks)",
        permissions=("change",),
    )
    def reset_health(self, request: HttpRequest, queryset: Any) -> None:
        count = 0
        for connection in queryset.select_related("provider"):
            board.reset(connection_key(connection.provider.slug, connection.name))
            count += 1
        logger.info(
            "admin %s reset the health state of %d connection(s)", request.user, count
        )
        self.message_user(request, f"Health state reset for {count} connection(s).")

    @admin.action(
        description="Re-enable now (clear an auth disable)", permissions=("change",)
    )
    def reenable_now(self, request: HttpRequest, queryset: Any) -> None:
        count = 0
        for connection in queryset.select_related("provider"):
            board.reenable(connection_key(connection.provider.slug, connection.name))
            count += 1
        logger.info("admin %s re-enabled %d connection(s)", request.user, count)
        self.message_user(request, f"Re-enabled {count} connection(s).")

    @admin.display(description="credential")
    def secret(self, obj: Connection) -> str:
        """The key's env reference or last four, and which other fields are set
        (their names only, spec 10 §3)."""
        others = obj.secret_names()
        parts = [obj.api_key_display] if obj.api_key_display else []
        if others:
            parts.append("set: " + ", ".join(others))
        return "; ".join(parts) or "—"

    def save_model(
        self, request: HttpRequest, obj: Connection, form: Any, change: bool
    ) -> None:
        services.save_connection(obj)
        if form.changes_secret:  # new credentials clear an auth disable
            board.reenable(connection_key(obj.provider.slug, obj.name))

    def delete_model(self, request: HttpRequest, obj: Connection) -> None:
        services.delete_connection(obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset)
        services.bump_config_revision()


@admin.register(ProviderModel)
class ProviderModelAdmin(ModelAdmin):
    form = ProviderModelForm
    list_display = (
        "__str__",
        "input_cost",
        "output_cost",
        "context_window",
        "max_output_tokens",
        "tier",
        "capabilities",
    )
    list_filter = ("provider", "tier")
    search_fields = ("model_id", "provider__slug")
    list_select_related = ("provider",)
    fields = ("provider", *ProviderModelForm.Meta.fields)

    def save_model(
        self, request: HttpRequest, obj: ProviderModel, form: Any, change: bool
    ) -> None:
        services.save_model(obj)

    def delete_model(self, request: HttpRequest, obj: ProviderModel) -> None:
        services.delete_model(obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset)
        services.bump_config_revision()
