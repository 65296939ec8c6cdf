"""Providers, their connections (accounts) and the configured model catalog."""

from __future__ import annotations

from django.db import models

from providers import crypto


class Provider(models.Model):
    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        ANTHROPIC = "anthropic", "Anthropic Messages"
        MOCK = "mock", "Built-in mock (in-process)"

    slug = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    base_url = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.slug


class Connection(models.Model):
    """One account of a provider; each is a separate routing candidate."""

    class Tier(models.TextChoices):
        FREE = "free"
        STANDARD = "standard"
        PRO = "pro"
        ULTRA = "ultra"

    provider = models.ForeignKey(
        Provider, on_delete=models.CASCADE, related_name="connections"
    )
    name = models.CharField(max_length=64)
    # Either an ``env:NAME`` reference kept as is, or a Fernet token (never both).
    api_key_ref = models.CharField(max_length=200, blank=True)
    api_key_encrypted = models.TextField(blank=True)
    api_key_last4 = models.CharField(max_length=4, blank=True)
    tier = models.CharField(max_length=16, choices=Tier.choices, default=Tier.STANDARD)
    default_model = models.CharField(max_length=256, blank=True)
    active = models.BooleanField(default=True)
    priority = models.IntegerField(default=0)
    quota_remaining_percent = models.FloatField(null=True, blank=True)
    quota_reset_interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_concurrency = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("provider__slug", "priority", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("provider", "name"), name="connection_unique_per_provider"
            ),
        )

    def __str__(self) -> str:
        return f"{self.provider.slug}@{self.name}"

    def set_api_key(self, value: str | None) -> None:
        """Store a literal (encrypted) or an ``env:NAME`` reference; None/"" clears."""
        value = (value or "").strip()
        if value.startswith("env:"):
            self.api_key_ref, self.api_key_encrypted, self.api_key_last4 = value, "", ""
        elif value:
            self.api_key_ref = ""
            self.api_key_encrypted = crypto.encrypt(value)
            self.api_key_last4 = value[-4:]
        else:
            self.api_key_ref = self.api_key_encrypted = self.api_key_last4 = ""

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_ref or self.api_key_encrypted)

    @property
    def api_key_display(self) -> str:
        """What the admin may show: the env reference or ``•••• <last 4>``."""
        if self.api_key_ref:
            return self.api_key_ref
        if self.api_key_encrypted:
            return f"•••• {self.api_key_last4}"
        return ""


class ProviderModel(models.Model):
    """A model the operator configured for a provider (YAML ``providers[].models``)."""

    class ModelTier(models.TextChoices):
        BUDGET = "budget"
        FAST = "fast"
        STANDARD = "standard"
        PREMIUM = "premium"

    provider = models.ForeignKey(
        Provider, on_delete=models.CASCADE, related_name="models"
    )
    model_id = models.CharField(max_length=256)
    position = models.PositiveIntegerField(default=0)
    input_cost = models.FloatField(null=True, blank=True, help_text="USD per 1M tokens")
    output_cost = models.FloatField(
        null=True, blank=True, help_text="USD per 1M tokens"
    )
    cache_read_cost = models.FloatField(null=True, blank=True)
    cache_write_cost = models.FloatField(null=True, blank=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    capabilities = models.JSONField(null=True, blank=True, help_text="null = unknown")
    tier = models.CharField(max_length=16, choices=ModelTier.choices, blank=True)

    class Meta:
        ordering = ("provider__slug", "position", "model_id")
        constraints = (
            models.UniqueConstraint(
                fields=("provider", "model_id"), name="model_unique_per_provider"
            ),
        )

    def __str__(self) -> str:
        return f"{self.provider.slug}/{self.model_id}"


class ConfigRevision(models.Model):
    """One row; bumped in the same transaction as every configuration write."""

    version = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"config v{self.version}"
