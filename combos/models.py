"""Combos, their targets, model->combo mappings, API keys, overrides, smart routes
and the gateway-wide routing settings.  Rows are written only through
``combos.services`` (which validates and bumps the config revision)."""

from __future__ import annotations

from typing import cast

from django.db import models

from gateway.planning.strategies import SPECS
from providers.fields import RegistryChoiceField


class Combo(models.Model):
    # Functional Enum API; django-stubs only types TextChoices(value[, label]).
    Strategy = models.TextChoices(  # type: ignore[call-overload]
        "Strategy", [(name, name) for name in SPECS]
    )

    name = models.CharField(max_length=64, unique=True)
    name_lower = models.CharField(max_length=64, unique=True, editable=False)
    strategy = RegistryChoiceField(
        max_length=32, choices=Strategy.choices, default="priority"
    )
    active = models.BooleanField(default=True)
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def save(self, *args: object, **kwargs: object) -> None:
        self.name_lower = self.name.lower()
        super().save(*args, **kwargs)  # type: ignore[arg-type]


class ComboTarget(models.Model):
    """A model target (``model`` = provider/model) or a combo-ref (``ref``)."""

    combo = models.ForeignKey(Combo, on_delete=models.CASCADE, related_name="targets")
    position = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=300, blank=True)
    connection = models.CharField(max_length=64, blank=True)
    ref = models.ForeignKey(
        Combo,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="referenced_by",
    )
    weight = models.FloatField(null=True, blank=True)
    timeout_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ("combo", "position", "id")

    def __str__(self) -> str:
        return f"combo:{cast(Combo, self.ref).name}" if self.ref_id else self.model


class ModelComboMapping(models.Model):
    pattern = models.CharField(max_length=300)
    combo = models.ForeignKey(Combo, on_delete=models.PROTECT, related_name="mappings")
    priority = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-priority", "created_at", "id")
        constraints = (
            models.UniqueConstraint(
                fields=("pattern", "combo"), name="mapping_unique_pattern_combo"
            ),
        )

    def __str__(self) -> str:
        return f"{self.pattern} -> {self.combo}"


class ApiKey(models.Model):
    class Period(models.TextChoices):
        DAY = "day"
        WEEK = "week"
        MONTH = "month"

    name = models.CharField(max_length=100, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    active = models.BooleanField(default=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    allowed_models = models.JSONField(
        null=True, blank=True, help_text="globs; empty = all"
    )
    rpm = models.PositiveIntegerField(null=True, blank=True)
    tpm = models.PositiveIntegerField(null=True, blank=True)
    budget_usd = models.DecimalField(
        max_digits=14, decimal_places=4, null=True, blank=True
    )
    budget_period = models.CharField(
        max_length=8, choices=Period.choices, default=Period.MONTH
    )
    failover_defaults = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class CandidateOverride(models.Model):
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.CASCADE, related_name="overrides"
    )
    channel = models.CharField(max_length=64)
    exclude = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("api_key__name", "channel")
        constraints = (
            models.UniqueConstraint(
                fields=("api_key", "channel"), name="override_unique_key_channel"
            ),
        )

    def __str__(self) -> str:
        return f"{self.api_key.name}: auto/{self.channel}"


class SmartRoute(models.Model):
    alias = models.CharField(max_length=100, unique=True)
    easy = models.CharField(max_length=300)
    hard = models.CharField(max_length=300)
    threshold = models.PositiveIntegerField(default=4)
    session_ttl_seconds = models.PositiveIntegerField(default=1800)

    class Meta:
        ordering = ("alias",)

    def __str__(self) -> str:
        return self.alias


class GatewaySettings(models.Model):
    """The YAML ``settings:`` block (one row); only explicitly set keys are stored."""

    data = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "gateway settings"
        verbose_name_plural = "gateway settings"

    def __str__(self) -> str:
        return "Gateway settings"


class AdminToken(models.Model):
    """A REST API token bound to a staff user (``omr-adm-`` + 43 chars, hashed)."""

    user = models.ForeignKey(
        "auth.User", on_delete=models.CASCADE, related_name="omniroute_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
