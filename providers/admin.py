"""Admin for providers, connections (secrets write-only) and the model catalog."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from unfold.admin import ModelAdmin, TabularInline

from gateway.dialects import REGISTRY
from gateway.templatetags.omr import omr_left
from providers import (
    admin_arena,  # noqa: F401 - registers the Arena score and alias admins
    admin_jobs,  # noqa: F401 - registers the job and catalog admins
    services,
)
from providers.admin_history import (
    FieldHistory,
    connection_snapshot,
    provider_snapshot,
)
from providers.connection_recheck import stored_connection_problems
from providers.health import board, connection_key, summarize
from providers.models import Connection, Provider, ProviderModel
from providers.presets import PRESETS
from providers.validation import (
    ALL_WIRES,
    CAPABILITIES,
    CREDENTIAL_SECRETS,
    CREDENTIAL_SETTINGS,
    DEPLOYMENT_KINDS,
    SECRET_ROUTING_SETTINGS,
    VERIFY_OFF,
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
    # render_value: a secret typed into a form that fails to save comes back in it
    # (issue #15); a stored one is never an initial value, so it is never rendered
    api_key = forms.CharField(
        required=False,
        strip=True,
        help_text=SECRET_HELP,
        widget=forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"}),
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
        # a connection moved to another provider keeps what it stores: checked
        # against the new provider's kind, its api_key included (issue #14)
        moved = bool(
            self.instance.pk
            and isinstance(provider, Provider)
            and provider.pk != self.instance.provider_id
        )
        if self.instance.pk and not data.get("clear_secrets"):
            # a stored field counts as given (its value is never shown)
            stored = {
                *(self.instance.secret_refs or {}),
                *self.instance.stored_secrets(),
            }
            kept = stored if moved else stored & set(secrets)
            given = {**dict.fromkeys(kept, "***"), **given}
        keeps_key = (
            moved
            and self.instance.has_api_key
            and not data.get("api_key")
            and not data.get("clear_api_key")
        )
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
                "api_key": data.get("api_key") or ("***" if keeps_key else None),
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
            else forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"})
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

    @admin.display(description="health")
    def health(self, obj: Connection) -> str:
        return "—" if obj.pk is None else health_badge(obj)


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


def _preset_choices() -> list[tuple[str, str]]:
    return [("", "none"), *((name, p.label or name) for name, p in PRESETS.items())]


class ProviderForm(forms.ModelForm):
    preset = forms.ChoiceField(
        choices=_preset_choices,
        required=False,
        help_text="The well-known provider it was made from (spec 10 §2): its kind, "
        "base URL and catalog id are filled in; what is given here wins.",
    )
    models_dev_id = forms.CharField(
        required=False,
        max_length=100,
        label="models.dev id",
        help_text="The provider's id in the models.dev catalog: its models' prices, "
        "limits and capabilities come from there, so a model row needs only its id.",
    )
    wire = forms.ChoiceField(
        choices=[(w, w) for w in ALL_WIRES],
        initial="chat",
        required=False,
        help_text="The upstream API of its models: chat (Chat Completions) or, for "
        "the OpenAI-compatible kind, responses (the Responses API).",
    )

    class Meta:
        model = Provider
        fields = ("slug", "preset", "kind", "base_url", "models_dev_id", "wire")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.settings if self.instance.pk else {}
        if isinstance(stored, dict) and stored.get("models_dev_id"):
            self.fields["models_dev_id"].initial = stored["models_dev_id"]

    def clean_wire(self) -> str:
        return self.cleaned_data.get("wire") or "chat"

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())
        check = Checker("")
        from providers.validation import validate_provider

        clean = validate_provider(
            {
                k: data.get(k)
                for k in ("slug", "preset", "kind", "base_url", "wire", "models_dev_id")
                if data.get(k)
            },
            check,
        )
        if not data.get("base_url") and clean.get("base_url"):
            data["base_url"] = clean["base_url"]  # the preset's
        _apply_problems(self, check, {})
        slug = data.get("slug")
        if isinstance(slug, str) and "slug" not in self.errors:
            # slugs resolve ignoring case (spec 03 §1), as REST and YAML check
            clash = Provider.objects.filter(slug__iexact=slug)
            if self.instance.pk:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                self.add_error("slug", f"a provider '{clash[0].slug}' already exists")
        kind = data.get("kind") or clean.get("kind")
        if self.instance.pk and isinstance(kind, str) and not self.errors:
            # its stored connections must suit the new kind and settings (#14)
            for problem in stored_connection_problems(
                self.instance,
                kind=kind,
                settings=self._settings(data.get("models_dev_id")),
            ):
                self.add_error(None, str(problem))
        return data

    def _settings(self, catalog_id: str | None) -> dict[str, Any]:
        """The stored settings with the form's ``models_dev_id``, as saved."""
        settings = dict(self.instance.settings or {}) if self.instance.pk else {}
        if catalog_id:
            settings["models_dev_id"] = catalog_id
        else:
            settings.pop("models_dev_id", None)
        return settings

    def save(self, commit: bool = True) -> Provider:
        provider: Provider = super().save(commit=False)
        settings = dict(provider.settings or {})
        catalog_id = self.cleaned_data.get("models_dev_id")
        if catalog_id:
            settings["models_dev_id"] = catalog_id
        else:
            settings.pop("models_dev_id", None)
        provider.settings = settings
        if commit:
            services.save_provider(provider)
        return provider


PRESET_LIST_TEMPLATE = "admin/providers/provider/preset_list.html"


def preset_rows() -> list[dict[str, Any]]:
    """The presets as the "Add provider" page lists them (spec 10 §2)."""
    return [
        {
            "name": name,
            "label": preset.label or name,
            "kind": preset.kind,
            "base_url": preset.base_url,
            "models_dev_id": preset.models_dev_id,
            "needs_key": preset.needs_key,
            "available": preset.kind in REGISTRY,
        }
        for name, preset in PRESETS.items()
    ]


@admin.register(Provider)
class ProviderAdmin(FieldHistory, ModelAdmin):
    def history_snapshot(self, obj: Provider) -> dict[str, Any]:
        return provider_snapshot(obj)

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

    def add_view(
        self,
        request: HttpRequest,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        """Spec 10 §2: "Add provider" starts from the preset list; choosing one (or
        none) opens the form, filled from it."""
        if request.method == "GET" and "preset" not in request.GET:
            if not self.has_add_permission(request):
                raise PermissionDenied
            return TemplateResponse(
                request,
                PRESET_LIST_TEMPLATE,
                {
                    **self.admin_site.each_context(request),
                    "title": "Add provider: choose a preset",
                    "presets": preset_rows(),
                    "opts": self.model._meta,
                    "is_popup": "_popup" in request.GET,
                },
            )
        return super().add_view(request, form_url, extra_context)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = dict(super().get_changeform_initial_data(request))
        preset = PRESETS.get(str(request.GET.get("preset") or ""))
        if preset is not None:
            initial.setdefault("kind", preset.kind)
            initial.setdefault("base_url", preset.base_url)
            initial.setdefault("models_dev_id", preset.models_dev_id)
        return initial

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
        if (obj.settings or {}).get("verify") is False:  # spec 10 §4, loudly
            logger.warning("provider %r: %s", obj.slug, VERIFY_OFF)
            messages.warning(request, f"{obj.slug}: {VERIFY_OFF}.")

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


HEALTH_ACTION_CONFIRM_TEMPLATE = "admin/providers/connection/health_action_confirm.html"
#: the connection list's health actions: their verb and what they clear, for the
#: page that asks first (the dashboard's Reset / Re-enable ask the same way)
HEALTH_ACTIONS = {
    "reset_health": (
        "Reset",
        "clears their breaker, cooldown, auth disable and locked models: requests "
        "are routed to them again at once, even if the upstream is still failing",
    ),
    "reenable_now": (
        "Re-enable",
        "clears their auth disable: requests are routed to them again at once, with "
        "the credential that was refused",
    ),
}


def health_badge(obj: Connection) -> str:
    """A connection's health as the console shows it: one badge in words, what it
    is, and the time left counting down (issue #15)."""
    found = summarize(connection_key(obj.provider.slug, obj.name))
    badge = {"bad": "omr-bad", "warn": "omr-warn", "ok": "omr-ok"}[found.severity]
    left = omr_left(_aware(found.until)) if found.until is not None else ""
    return format_html(
        '<span class="omr-badge {}" data-health="{}">{}</span> {} {}',
        badge,
        found.state,
        found.state.replace("_", " "),
        "" if found.healthy else found.detail,
        left,
    )


class HealthFilter(admin.SimpleListFilter):
    """Issue #15: find the failing connections (the health board's state)."""

    title = "health"
    parameter_name = "health"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return (("unhealthy", "unhealthy"), ("healthy", "healthy"))

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        wanted = self.value()
        if wanted not in ("unhealthy", "healthy"):
            return queryset
        ids = [
            c.pk
            for c in queryset.select_related("provider")
            if summarize(connection_key(c.provider.slug, c.name)).healthy
            == (wanted == "healthy")
        ]
        return queryset.filter(pk__in=ids)


def _aware(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


@admin.register(Connection)
class ConnectionAdmin(FieldHistory, ModelAdmin):
    def history_snapshot(self, obj: Connection) -> dict[str, Any]:
        return connection_snapshot(obj)

    form = ConnectionForm
    # issue #15: fits 1440 px; the health in one badge with its time left, the
    # breaker, cooldown, auth and locks in detail on the connection's page
    list_display = (
        "__str__",
        "tier",
        "active",
        "priority",
        "health",
        "secret",
    )
    list_filter = (HealthFilter, "provider", "tier", "active")
    search_fields = ("name", "provider__slug", "default_model")
    list_select_related = ("provider",)
    readonly_fields = (
        "secret",
        "health",
        "circuit",
        "cooldown",
        "auth_status",
        "locked_models",
    )
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
        health = (
            ["health", "circuit", "cooldown", "auth_status", "locked_models"]
            if obj
            else []
        )
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

    @admin.display(description="health")
    def health(self, obj: Connection) -> str:
        return health_badge(obj)

    def _described(self, obj: Connection) -> Any:
        return board.describe(connection_key(obj.provider.slug, obj.name), time.time())

    @admin.display(description="circuit")
    def circuit(self, obj: Connection) -> str:
        health = self._described(obj)
        if health.circuit == "closed":
            return "closed"
        if health.circuit == "half_open":
            return "half-open: the next request probes it"
        until = health.open_until
        return format_html("open, {}", omr_left(_aware(until)) if until else "")

    @admin.display(description="rate-limit cooldown")
    def cooldown(self, obj: Connection) -> str:
        until = self._described(obj).cooldown_until
        if until is None or until <= time.time():
            return "—"
        return format_html("cooling, {}", omr_left(_aware(until)))

    @admin.display(description="auth")
    def auth_status(self, obj: Connection) -> str:
        auth = self._described(obj).auth
        if not auth.active(time.time()):
            return "ok"
        message = f": {auth.message}" if auth.message else ""
        return format_html(
            "{} disabled{}, {}",
            auth.reason or "auth",
            message,
            omr_left(_aware(auth.until)),
        )

    @admin.display(description="locked models")
    def locked_models(self, obj: Connection) -> str:
        now = time.time()
        locks = sorted(
            (m, u) for m, u in self._described(obj).locked_models.items() if u > now
        )
        if not locks:
            return "—"
        return format_html_join(
            ", ", "{} ({})", ((m, omr_left(_aware(u))) for m, u in locks)
        )

    def _ask_first(
        self, request: HttpRequest, queryset: Any, action: str
    ) -> TemplateResponse | None:
        """The health actions ask first, as Delete does: the first POST renders a
        page listing the selected connections and their state now; its "Yes"
        re-posts the action with ``post=yes``, which acts (``None`` here)."""
        if request.POST.get("post") == "yes":
            return None
        verb, effect = HEALTH_ACTIONS[action]
        rows = [
            {"connection": c, "health": health_badge(c)}
            for c in queryset.select_related("provider").order_by(
                "provider__slug", "name"
            )
        ]
        count = len(rows)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{verb} {count} connection{'' if count == 1 else 's'}?",
            "opts": self.model._meta,
            "media": self.media,
            "rows": rows,
            "action": action,
            "verb": verb,
            "effect": effect,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, HEALTH_ACTION_CONFIRM_TEMPLATE, context)

    @admin.action(
        description="Reset health state (breaker, cooldown, auth, locks)",
        permissions=("change",),
    )
    def reset_health(self, request: HttpRequest, queryset: Any) -> Any:
        asked = self._ask_first(request, queryset, "reset_health")
        if asked is not None:
            return asked
        count = 0
        for connection in queryset.select_related("provider"):
            board.reset(connection_key(connection.provider.slug, connection.name))
            count += 1
        logger.info(
            "admin %s reset the health state of %d connection(s)", request.user, count
        )
        self.message_user(request, f"Health state reset for {count} connection(s).")
        return None

    @admin.action(
        description="Re-enable now (clear an auth disable)", permissions=("change",)
    )
    def reenable_now(self, request: HttpRequest, queryset: Any) -> Any:
        asked = self._ask_first(request, queryset, "reenable_now")
        if asked is not None:
            return asked
        disabled = []
        for connection in queryset.select_related("provider"):
            key = connection_key(connection.provider.slug, connection.name)
            if summarize(key).state == "auth_disabled":
                disabled.append(key)
            board.reenable(key)
        logger.info("admin %s re-enabled %s", request.user, disabled or "none")
        if disabled:
            self.message_user(
                request, f"Re-enabled {len(disabled)}: {', '.join(disabled)}."
            )
        else:
            self.message_user(
                request,
                "None of the selected connections was auth-disabled.",
                level=messages.INFO,
            )
        return None

    @admin.display(description="credential")
    def secret(self, obj: Connection) -> str:
        """The key's env reference or ``set``, and which other fields are set
        (their names only, spec 10 §3); never any part of a credential."""
        others = obj.secret_names()
        parts = [f"api key {obj.api_key_display}"] if obj.api_key_display else []
        if others:
            parts.append("set: " + ", ".join(others))
        return "; ".join(parts) or "not set"

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
