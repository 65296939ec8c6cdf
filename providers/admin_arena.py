"""Admin for LMArena scores (read-only) and the aliases staff manage (spec 06 §3.3).

The score list filters on the match: *matched*, *unmatched* (no model id and no
``ignore`` alias: the names staff still have to decide on) and *ignored*.  An
unmatched row links to the alias add form pre-filled with its exact Arena name.
Saving or deleting an alias re-runs the name matching on the stored rows at once,
so routing sees the new match within a minute (``gateway.auto.arena``) instead of
after the next sync.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from unfold.admin import ModelAdmin

from providers import arena_names
from providers.models import ArenaAlias, ArenaScore, CatalogModel, ProviderModel

logger = logging.getLogger(__name__)


def _has_ignore_alias() -> Exists:
    return Exists(
        ArenaAlias.objects.filter(
            arena_name=OuterRef("model_name"), model_id=ArenaAlias.IGNORE
        )
    )


class MatchFilter(admin.SimpleListFilter):
    title = "match"
    parameter_name = "match"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return (
            ("matched", "matched"),
            ("unmatched", "unmatched"),
            ("ignored", "ignored"),
        )

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        value = self.value()
        if value == "matched":
            return queryset.filter(matched_model__isnull=False)
        if value in ("unmatched", "ignored"):
            return queryset.filter(
                matched_model__isnull=True, is_ignored=value == "ignored"
            )
        return queryset


def alias_add_url(arena_name: str) -> str:
    """The alias add form, pre-filled with ``arena_name``."""
    query = urlencode({"arena_name": arena_name})
    return f"{reverse('admin:providers_arenaalias_add')}?{query}"


@admin.register(ArenaScore)
class ArenaScoreAdmin(ModelAdmin):
    """Rows of the sync job: read-only; the job deletes them when they expire."""

    list_display = (
        "model_name",
        "category",
        "match",
        "fitness",
        "rating",
        "votes",
        "confidence",
        "rank",
        "publish_date",
        "expires_at",
    )
    list_filter = (MatchFilter, "category", "confidence", "source", "publish_date")
    search_fields = ("model_name", "matched_model")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ArenaScore]:
        return super().get_queryset(request).annotate(is_ignored=_has_ignore_alias())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="model", ordering="matched_model")
    def match(self, obj: ArenaScore) -> str:
        if obj.matched_model:
            return obj.matched_model
        if getattr(obj, "is_ignored", False):
            return "ignored"
        return format_html('<a href="{}">add alias</a>', alias_add_url(obj.model_name))


class ArenaAliasForm(forms.ModelForm):
    class Meta:
        model = ArenaAlias
        fields = ("arena_name", "model_id")

    def clean_model_id(self) -> str:
        value = self.cleaned_data["model_id"].strip()
        if value.lower() == ArenaAlias.IGNORE:
            return ArenaAlias.IGNORE
        known = arena_names.known_ids(
            CatalogModel.objects.filter(model_id__iexact=value).values_list(
                "model_id", flat=True
            ),
            ProviderModel.objects.filter(model_id__iexact=value).values_list(
                "model_id", flat=True
            ),
        )
        if value.lower() not in known:
            raise forms.ValidationError(
                "No catalog or configured model has this id; "
                'enter an existing id, or "ignore".'
            )
        return value


@admin.register(ArenaAlias)
class ArenaAliasAdmin(ModelAdmin):
    form = ArenaAliasForm
    list_display = ("arena_name", "model_id", "updated_at")
    search_fields = ("arena_name", "model_id")

    @transaction.atomic
    def save_model(
        self, request: HttpRequest, obj: ArenaAlias, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        changed = arena_names.rematch()
        logger.info("admin %s: alias %s; %d rows rematched", request.user, obj, changed)

    @transaction.atomic
    def delete_model(self, request: HttpRequest, obj: ArenaAlias) -> None:
        super().delete_model(request, obj)
        arena_names.rematch()

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset)
        arena_names.rematch()
