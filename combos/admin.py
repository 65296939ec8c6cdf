"""Admin for combos, mappings, API keys, overrides, smart routes and gateway settings.

Every form runs the shared validator in ``clean()`` (errors land on the field they
name) and every save goes through ``combos.services``, which validates again, writes
and bumps the config revision in one transaction.  The forms and the combo editor's
per-strategy option fields live in ``combos.admin_forms``.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html
from unfold.admin import ModelAdmin, TabularInline

from combos import services, settings_form
from combos.admin_forms import (
    CONFIG_FIELD_NAMES,
    ComboForm,
    OverrideForm,
    add_problems,
    confirm_shadow_field,
    console_text,
    format_targets,
    parse_target_line,
    require_shadow_confirmation,
)
from combos.config_export import snapshot_of
from combos.key_validation import THRESHOLD_HELP
from combos.models import (
    AdminToken,
    ApiKey,
    CandidateOverride,
    Combo,
    GatewaySettings,
    ModelComboMapping,
    SmartRoute,
)
from gateway.kernel.smart import MAX_SCORE
from providers.admin_history import FieldHistory
from providers.validation import ON_ORDER, Problem

__all__ = [
    "CONFIG_FIELD_NAMES",
    "ComboForm",
    "add_problems",
    "format_targets",
    "parse_target_line",
]


class ConfigAdmin(FieldHistory, ModelAdmin):
    """Saves through a service instead of ``obj.save()``; the history lists each
    changed field (the row as its export describes it, secrets masked)."""

    def history_snapshot(self, obj: Any) -> dict[str, Any]:
        return snapshot_of(obj)

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        raise TypeError(f"{type(self).__name__} must define write()")

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        result = self.write(form, obj if change else None)
        obj.__dict__.update(result.instance.__dict__)
        for warning in result.warnings:
            messages.warning(request, self.warning_text(warning))
        if result.plaintext_key:
            messages.success(
                request,
                f"New API key (shown once, copy it now): {result.plaintext_key}",
            )

    def warning_text(self, warning: Problem) -> str:
        return console_text(warning)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.delete_instance(obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(Combo)
class ComboAdmin(ConfigAdmin):
    form = ComboForm
    list_display = ("name", "strategy", "active", "target_count", "updated_at")
    list_filter = ("strategy", "active")
    search_fields = ("name", "targets__model")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "strategy",
                    "active",
                    "targets_text",
                    "confirm_shadow",
                )
            },
        ),
        (
            "Strategy options",
            {
                "fields": CONFIG_FIELD_NAMES,
                "description": "Empty = the default. Only the options the chosen "
                "strategy reads are saved.",
            },
        ),
        ("Other config (advanced)", {"fields": ("config_text",)}),
    )

    class Media:
        js = ("combos/combo_editor.js",)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        # the targets editor suggests what a target may name (issue #15)
        routes = [
            (value if "/" in value else f"combo:{value}", label)
            for value, label in route_choices()
            if value != "auto" and "(smart alias)" not in label
        ]
        extra = {**(extra_context or {}), "omr_routes": routes}
        return super().changeform_view(request, object_id, form_url, extra)

    @admin.display(description="targets")
    def target_count(self, obj: Combo) -> int:
        return obj.targets.count()

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_combo(form.config_data, instance)

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        if form.ignored_keys:
            messages.info(
                request,
                f"Not saved, strategy {obj.strategy} does not read them: "
                + ", ".join(form.ignored_keys),
            )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        try:
            services.delete_combo(obj)
        except services.ComboInUse as exc:
            messages.error(request, str(exc))

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, count, perms, protected = super().get_deleted_objects(objs, request)
        for obj in objs:
            protected += services.combo_referrers(obj)
        return deleted, count, perms, protected


class MappingForm(forms.ModelForm):
    class Meta:
        model = ModelComboMapping
        fields = ("pattern", "combo", "priority")

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        combo = cleaned.get("combo")
        self.config_data = {
            "pattern": cleaned.get("pattern"),
            "combo": combo.name if combo else None,
            "priority": cleaned.get("priority") or 0,
        }
        check = services.Checker("")
        services.validate_mapping(self.config_data, check, services.build_index())
        add_problems(self, check.problems)
        return cleaned


@admin.register(ModelComboMapping)
class MappingAdmin(ConfigAdmin):
    form = MappingForm
    list_display = ("pattern", "combo", "priority", "created_at")
    list_filter = ("combo",)
    search_fields = ("pattern", "combo__name")
    ordering = ("-priority", "created_at")

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_mapping(form.config_data, instance)


def route_choices() -> list[tuple[str, str]]:
    """What a client may name, for pickers: configured models, combos, smart aliases
    and the auto routes (issue #15: choose from the catalog, not free text)."""
    index = services.build_index()
    models = sorted(
        f"{slug}/{model}"
        for slug, _connections, ids in index.providers.values()
        for model in ids
    )
    combos = sorted(name for name, _strategy, _refs in index.combos.values())
    aliases = sorted(index.smart_aliases)
    return [
        *((m, m) for m in models),
        *((c, f"{c} (combo)") for c in combos),
        *((a, f"{a} (smart alias)") for a in aliases),
        ("auto", "auto (zero-config)"),
    ]


class ApiKeyForm(forms.ModelForm):
    allowed_text = forms.CharField(
        label="Allowed models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One glob per line (e.g. openai/*, my-combo, auto*). Empty = all.",
    )
    # failover_defaults (spec 02 §13) as fields (issue #15): a chain of up to three
    # entries in order, picked from what the gateway routes, the two timeouts and the
    # triggers
    fo_model_1 = forms.ChoiceField(
        label="Failover chain 1",
        required=False,
        help_text="The key's default failover chain, in order: a request that names "
        "one of these alone (model, not models) goes on to the ones after it when it "
        "fails; a request for anything else is not extended. Empty = none.",
    )
    fo_model_2 = forms.ChoiceField(label="Failover chain 2", required=False)
    fo_model_3 = forms.ChoiceField(label="Failover chain 3", required=False)
    fo_timeout_ms = forms.IntegerField(
        label="Chain attempt timeout (ms)",
        required=False,
        min_value=1000,
        max_value=300_000,
        help_text="Per-attempt timeout along this chain; empty = the gateway's "
        "attempt_timeout_ms. Allowed 1000–300000.",
    )
    fo_first_token_timeout_ms = forms.IntegerField(
        label="Chain first-token timeout (ms)",
        required=False,
        min_value=500,
        max_value=60_000,
        help_text="Empty = none. Allowed 500–60000.",
    )
    fo_on = forms.MultipleChoiceField(
        label="Fail over on",
        required=False,
        choices=[(reason, reason.replace("_", " ")) for reason in ON_ORDER],
        widget=forms.CheckboxSelectMultiple,
        help_text="The failures that move to the next entry; none ticked = all "
        "of them.",
    )

    class Meta:
        model = ApiKey
        fields = (
            "name",
            "active",
            "expires_at",
            "rpm",
            "tpm",
            "budget_usd",
            "budget_period",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["allowed_text"].initial = "\n".join(
                self.instance.allowed_models or []
            )
        routes = route_choices()
        defaults = (
            dict(self.instance.failover_defaults or {}) if self.instance.pk else {}
        )
        models = list(defaults.get("models") or [])
        for position in (1, 2, 3):
            field = cast(forms.ChoiceField, self.fields[f"fo_model_{position}"])
            current = models[position - 1] if len(models) >= position else ""
            extra = (
                [(current, current)] if current and current not in dict(routes) else []
            )
            field.choices = [("", "—"), *routes, *extra]
            field.initial = current
        self.fields["fo_timeout_ms"].initial = defaults.get("timeout_ms")
        self.fields["fo_first_token_timeout_ms"].initial = defaults.get(
            "first_token_timeout_ms"
        )
        self.fields["fo_on"].initial = defaults.get("on") or []
        self.config_data: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        allowed = [
            g.strip()
            for g in (cleaned.get("allowed_text") or "").splitlines()
            if g.strip()
        ]
        budget = cleaned.get("budget_usd")
        self.config_data = {
            "name": cleaned.get("name"),
            "active": bool(cleaned.get("active")),
            "expires_at": cleaned.get("expires_at"),
            "allowed_models": allowed or None,
            "rpm": cleaned.get("rpm"),
            "tpm": cleaned.get("tpm"),
            "budget_usd": float(budget) if budget is not None else None,
            "budget_period": cleaned.get("budget_period"),
            "failover_defaults": self._failover_defaults(cleaned),
        }
        _, check = services.check_api_key(self.config_data, services.build_index())
        add_problems(
            self,
            check.problems,
            {
                "allowed_models": "allowed_text",
                "failover_defaults.models[0]": "fo_model_1",
                "failover_defaults.models[1]": "fo_model_2",
                "failover_defaults.models[2]": "fo_model_3",
                "failover_defaults.models": "fo_model_1",
                "failover_defaults.timeout_ms": "fo_timeout_ms",
                "failover_defaults.first_token_timeout_ms": (
                    "fo_first_token_timeout_ms"
                ),
                "failover_defaults.on": "fo_on",
                "failover_defaults": "fo_model_1",
            },
        )
        return cleaned

    @staticmethod
    def _failover_defaults(cleaned: dict[str, Any]) -> dict[str, Any] | None:
        models = [
            cleaned[f"fo_model_{n}"] for n in (1, 2, 3) if cleaned.get(f"fo_model_{n}")
        ]
        data: dict[str, Any] = {}
        if models:
            data["models"] = models
        for key in ("timeout_ms", "first_token_timeout_ms"):
            if cleaned.get(f"fo_{key}") is not None:
                data[key] = cleaned[f"fo_{key}"]
        if cleaned.get("fo_on"):
            data["on"] = list(cleaned["fo_on"])
        return data or None


class OverrideInline(TabularInline):
    """A key's candidate overrides, read-only, each linked to its editor.

    Editing happens on the override's own page: its checkbox list needs the room,
    and every write there goes through ``services.save_override`` (an inline save
    or delete would skip the validator and the revision bump).
    """

    model = CandidateOverride
    extra = 0
    fields = ("channel", "excluded_keys")
    readonly_fields = ("channel", "excluded_keys")
    show_change_link = True
    can_delete = False
    verbose_name = "candidate override"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="excluded keys")
    def excluded_keys(self, obj: CandidateOverride) -> str:
        return ", ".join(obj.exclude or []) or "(none)"


@admin.register(ApiKey)
class ApiKeyAdmin(ConfigAdmin):
    form = ApiKeyForm
    list_display = (
        "name",
        "prefix",
        "active",
        "expires_at",
        "rpm",
        "tpm",
        "budget_usd",
        "budget_period",
        "created_at",
    )
    list_filter = ("active", "budget_period")
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "created_at", "updated_at", "add_override")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "prefix",
                    "active",
                    "expires_at",
                    "allowed_text",
                    "rpm",
                    "tpm",
                    "budget_usd",
                    "budget_period",
                )
            },
        ),
        (
            "Failover defaults",
            {
                "fields": (
                    "fo_model_1",
                    "fo_model_2",
                    "fo_model_3",
                    "fo_timeout_ms",
                    "fo_first_token_timeout_ms",
                    "fo_on",
                ),
                "description": "Fallbacks this key's requests get when they name "
                "no chain of their own (spec 02 §13).",
            },
        ),
        (None, {"fields": ("add_override", "created_at", "updated_at")}),
    )

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[type[Any]]:
        # A new key has no overrides yet, and its add form posts no inline data.
        return [OverrideInline] if obj is not None else []

    @admin.display(description="candidate overrides")
    def add_override(self, obj: ApiKey | None) -> str:
        if obj is None or obj.pk is None:
            return "Save the key first, then add overrides per auto channel."
        url = reverse("admin:combos_candidateoverride_add")
        return format_html(
            '<a href="{}?api_key={}">Add a candidate override for this key</a>',
            url,
            obj.pk,
        )

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_api_key(form.config_data, instance)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.delete_api_key(obj)


@admin.register(CandidateOverride)
class OverrideAdmin(ConfigAdmin):
    form = OverrideForm
    list_display = ("api_key", "channel", "exclude")
    list_filter = ("channel",)
    search_fields = ("api_key__name", "channel")
    fields = ("api_key", "channel", "exclude_keys", "exclude_other")

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_override(form.config_data, instance)


class SmartRouteForm(forms.ModelForm):
    confirm_shadow = confirm_shadow_field()
    # the range is the validator's (its message says why); the widget shows it
    threshold = forms.IntegerField(
        initial=4,
        help_text=THRESHOLD_HELP,
        widget=forms.NumberInput(attrs={"min": 1, "max": MAX_SCORE}),
    )

    class Meta:
        model = SmartRoute
        fields = ("alias", "easy", "hard", "threshold", "session_ttl_seconds")

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        self.config_data = {
            k: cleaned.get(k) for k in self.Meta.fields if k != "confirm_shadow"
        }
        index = services.build_index()
        if self.instance.pk:
            index.drop_smart_route(self.instance.alias)
        check = services.Checker("")
        services.validate_smart_route(self.config_data, check, index)
        add_problems(self, check.problems)
        if not check.problems:
            require_shadow_confirmation(
                self,
                check.warnings,
                previous_name=self.instance.alias if self.instance.pk else None,
            )
        return cleaned


@admin.register(SmartRoute)
class SmartRouteAdmin(ConfigAdmin):
    form = SmartRouteForm
    list_display = (
        "alias",
        "easy",
        "hard",
        "threshold",
        "session_ttl_seconds",
        "details_link",
    )
    search_fields = ("alias", "easy", "hard")
    # adds a "Details" button: the alias's page of the last 24 h and its tester,
    # served by the gateway app and linked by URL name only (no import upwards)
    change_form_template = "admin/combos/smartroute/change_form.html"

    @admin.display(description="details")
    def details_link(self, obj: SmartRoute) -> str:
        return format_html(
            '<a href="{}">Details</a>',
            reverse("smart-route-detail", args=[obj.alias]),
        )

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_smart_route(form.config_data, instance)


class SettingsForm(forms.ModelForm):
    """One field per settings key, its default and range in the help (issue #15)."""

    class Meta:
        model = GatewaySettings
        fields = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        initial = settings_form.initial_values(dict(self.instance.data or {}))
        for name, (_key, field) in settings_form.settings_fields().items():
            self.fields[name] = field
            if name in initial:
                self.fields[name].initial = initial[name]

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        self.config_data = settings_form.settings_data(cleaned)
        check = services.Checker("settings")
        services.validate_settings(self.config_data, check)
        for problem in check.problems:
            field = settings_form.field_of(problem)
            self.add_error(field, problem.message if field else str(problem))
        return cleaned


@admin.register(GatewaySettings)
class GatewaySettingsAdmin(ConfigAdmin):
    form = SettingsForm

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return settings_form.fieldsets()

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        # the fields are added by the form itself, not by the model
        kwargs["fields"] = ()
        return super().get_form(request, obj, change, **kwargs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """The one row is added once, by a user allowed to add it."""
        return (
            super().has_add_permission(request) and not GatewaySettings.objects.exists()
        )

    def write(self, form: Any, instance: Any) -> services.SaveResult:
        return services.save_settings(form.config_data)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        """One row: the list page goes straight to it (or to Add when none)."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = GatewaySettings.objects.first()
        if row is None:
            return redirect("admin:combos_gatewaysettings_add")
        return redirect("admin:combos_gatewaysettings_change", row.pk)


@admin.register(AdminToken)
class AdminTokenAdmin(ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at")
    search_fields = ("name", "prefix", "user__username")
    fields = ("user", "name")

    def save_model(
        self, request: HttpRequest, obj: AdminToken, form: Any, change: bool
    ) -> None:
        if change:
            obj.save()
            return
        from combos.api_auth import issue_admin_token

        token = issue_admin_token(obj.user, obj.name)
        created = AdminToken.objects.get(prefix=token[:12], user=obj.user)
        obj.__dict__.update(created.__dict__)
        messages.success(request, f"New admin token (shown once): {token}")
