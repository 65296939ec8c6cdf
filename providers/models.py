"""Providers, their connections (accounts) and the configured model catalog."""

from __future__ import annotations

import json

from django.db import models

from gateway.dialects import REGISTRY
from providers import crypto
from providers.fields import RegistryChoiceField

#: every provider kind, from its dialect (``gateway.dialects.REGISTRY``)
KIND_CHOICES = [(kind, dialect.label) for kind, dialect in REGISTRY.items()]


class Provider(models.Model):
    slug = models.CharField(max_length=64, unique=True)
    kind = RegistryChoiceField(max_length=16, choices=KIND_CHOICES)
    base_url = models.CharField(max_length=500, blank=True)
    #: the upstream wire of its models (spec 10 §5): ``chat`` or, for the openai
    #: kind, ``responses`` (``gateway.dialects.wires_of``)
    wire = models.CharField(max_length=16, default="chat")
    #: the preset it was made from (spec 10 §2; "" = none)
    preset = models.CharField(max_length=32, blank=True)
    #: the outbound and catalog settings (spec 10 §4, §5): ``ca_bundle``,
    #: ``client_cert``, ``client_key``, ``headers`` (a mapping), ``models_dev_id``
    settings = models.JSONField(default=dict, blank=True)
    #: ``proxy_url`` (it may hold credentials: encrypted), or "none"
    proxy_url_encrypted = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.slug

    def set_proxy_url(self, value: str | None) -> None:
        """Store a proxy URL (encrypted: it may carry credentials), "none", or clear."""
        value = (value or "").strip()
        self.proxy_url_encrypted = crypto.encrypt(value) if value else ""

    @property
    def proxy_url(self) -> str | None:
        """The stored proxy URL, or None (unset or unreadable)."""
        if not self.proxy_url_encrypted:
            return None
        try:
            return crypto.decrypt(self.proxy_url_encrypted)
        except crypto.SecretUnreadable:
            return None


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
    # The kind's other secret fields (spec 10 §3): literals as one Fernet token of
    # a JSON object, ``env:NAME`` references kept as they are (never both per field)
    secrets_encrypted = models.TextField(blank=True)
    secret_refs = models.JSONField(default=dict, blank=True)
    # The kind's plain credential fields: region, project, use_default_credentials
    settings = models.JSONField(default=dict, blank=True)
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
            self.api_key_ref, self.api_key_encrypted = value, ""
        elif value:
            self.api_key_ref = ""
            self.api_key_encrypted = crypto.encrypt(value)
        else:
            self.api_key_ref = self.api_key_encrypted = ""

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_ref or self.api_key_encrypted)

    def stored_secrets(self) -> dict[str, str]:
        """The literal secret fields, decrypted ({} when none or unreadable)."""
        if not self.secrets_encrypted:
            return {}
        try:
            value = json.loads(crypto.decrypt(self.secrets_encrypted))
        except (crypto.SecretUnreadable, ValueError):
            return {}
        return (
            {str(k): str(v) for k, v in value.items()}
            if isinstance(value, dict)
            else {}
        )

    def set_secrets(self, given: dict[str, str | None]) -> bool:
        """Apply secret fields: a literal is encrypted, ``env:NAME`` kept as a
        reference, ``***`` keeps what is stored, None or "" removes the field.
        Fields not in ``given`` stay.  True when anything changed (an unchanged
        literal is not re-encrypted)."""
        literals = self.stored_secrets()
        refs = dict(self.secret_refs or {})
        before = (dict(literals), dict(refs))
        for name, raw in given.items():
            value = (raw or "").strip()
            if value == "***":
                continue
            literals.pop(name, None)
            refs.pop(name, None)
            if value.startswith("env:"):
                refs[name] = value
            elif value:
                literals[name] = value
        if (literals, refs) == before:
            return False
        self.secrets_encrypted = (
            crypto.encrypt(json.dumps(literals, sort_keys=True)) if literals else ""
        )
        self.secret_refs = refs
        return True

    def secret_names(self) -> list[str]:
        """The secret fields beside ``api_key`` that hold something (never their
        values)."""
        return sorted(set(self.secret_refs or {}) | set(self.stored_secrets()))

    @property
    def api_key_display(self) -> str:
        """What the admin may show: the env reference, or ``set`` for a stored key
        (no part of a credential is ever shown, issue #15)."""
        if self.api_key_ref:
            return self.api_key_ref
        if self.api_key_encrypted:
            return "set"
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
    #: this model's wire when it differs from its provider's (blank: the provider's)
    wire = models.CharField(max_length=16, blank=True)
    #: the Azure deployment that serves it (blank: its id; spec 10 §1)
    deployment = models.CharField(max_length=64, blank=True)

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


class JobLock(models.Model):
    """One row per scheduled job; held while ``locked_until`` is in the future.

    Taken by a conditional UPDATE (``locked_until < now`` -> ``now + hard limit``), so
    two processes never run the same job at once (spec 06 §3.1); a crashed holder's
    lock lapses at its hard limit.
    """

    job = models.CharField(max_length=64, unique=True)
    locked_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.job} until {self.locked_until:%Y-%m-%d %H:%M:%S}"


class JobRun(models.Model):
    """One row per run of a scheduled job (spec 06 §3.1).

    ``outcome`` is blank while the run is in progress (``finished_at`` is null too).
    """

    class Outcome(models.TextChoices):
        SUCCESS = "success"
        UNCHANGED = "unchanged"
        DRY_RUN = "dry_run"
        FAILED = "failed"
        SKIPPED_LOCKED = "skipped_locked"

    class TriggeredBy(models.TextChoices):
        BEAT = "beat"
        COMMAND = "command"
        ADMIN = "admin"

    job = models.CharField(max_length=64)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    payload_sha256 = models.CharField(max_length=64, blank=True)
    triggered_by = models.CharField(max_length=8, choices=TriggeredBy.choices)

    class Meta:
        ordering = ("-started_at", "-id")
        indexes = (
            models.Index(fields=("job", "-started_at"), name="jobrun_job_started"),
        )

    def __str__(self) -> str:
        # the run's number, not its time: a title cannot follow the reader's time
        # zone, and the page shows the start time in the console's time format
        return f"{self.job} run #{self.pk} ({self.outcome or 'running'})"

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class CatalogModel(models.Model):
    """One model of the models.dev catalog (spec 06 §3.2); never deleted by the job.

    Natural key ``(source_provider, model_id)``.  Costs are USD per 1M tokens; a null
    cost is unknown (no ``cost`` object means unpriced, never free).
    """

    class ModelClass(models.TextChoices):
        BUDGET = "budget"
        FAST = "fast"
        STANDARD = "standard"
        PREMIUM = "premium"

    source_provider = models.CharField(max_length=128)
    model_id = models.CharField(max_length=256)
    # provider level
    provider_name = models.TextField()
    provider_npm = models.TextField()
    provider_api = models.TextField(blank=True)
    provider_doc = models.TextField()
    # model level
    name = models.TextField()
    family = models.TextField(blank=True)
    attachment = models.BooleanField()
    reasoning = models.BooleanField()
    reasoning_options = models.JSONField(null=True, blank=True)
    tool_call = models.BooleanField()
    structured_output = models.BooleanField(null=True, blank=True)
    temperature = models.BooleanField(null=True, blank=True)
    knowledge = models.TextField(blank=True)
    release_date = models.TextField()
    last_updated = models.TextField()
    input_modalities = models.JSONField(default=list)
    output_modalities = models.JSONField(default=list)
    open_weights = models.BooleanField()
    context_window = models.PositiveBigIntegerField()
    input_limit = models.PositiveBigIntegerField(null=True, blank=True)
    output_limit = models.PositiveBigIntegerField()
    status = models.TextField(blank=True)
    input_cost = models.FloatField(null=True, blank=True, help_text="USD per 1M tokens")
    output_cost = models.FloatField(
        null=True, blank=True, help_text="USD per 1M tokens"
    )
    cache_read_cost = models.FloatField(null=True, blank=True)
    cache_write_cost = models.FloatField(null=True, blank=True)
    reasoning_cost = models.FloatField(null=True, blank=True)
    cost_tiers = models.JSONField(default=list, blank=True)
    # derived
    capabilities = models.JSONField(default=list)
    reasoning_efforts = models.JSONField(default=list)
    model_class = models.CharField(max_length=16, choices=ModelClass.choices)
    # bookkeeping for "never delete"
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    missing_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("source_provider", "model_id")
        constraints = (
            models.UniqueConstraint(
                fields=("source_provider", "model_id"), name="catalog_model_key"
            ),
        )

    def __str__(self) -> str:
        return f"{self.source_provider}/{self.model_id}"

    @property
    def is_deprecated(self) -> bool:
        return self.status == "deprecated"


class ArenaScore(models.Model):
    """One model's rating on one LMArena board snapshot (spec 06 §3.3).

    Natural key ``(source, category, model_name, publish_date)``.  ``fitness`` is
    leader-relative within its (source, category, publish_date) and is what the auto
    engine reads; ratings are never compared across sources or snapshots.  A row is
    ignored once ``expires_at`` has passed and deleted by the next run.
    """

    class Category(models.TextChoices):
        OVERALL = "overall"
        CODING = "coding"

    class Confidence(models.TextChoices):
        HIGH = "high"
        MEDIUM = "medium"
        LOW = "low"
        UNKNOWN = "unknown"

    source = models.CharField(max_length=500)
    category = models.CharField(max_length=16, choices=Category.choices)
    model_name = models.CharField(max_length=256)
    publish_date = models.DateField()
    rating = models.FloatField()
    rating_lower = models.FloatField(null=True, blank=True)
    rating_upper = models.FloatField(null=True, blank=True)
    votes = models.PositiveBigIntegerField(null=True, blank=True)
    rank = models.PositiveIntegerField(null=True, blank=True)
    confidence = models.CharField(max_length=8, choices=Confidence.choices)
    fitness = models.FloatField()
    # A bare model id (catalog or configured), or null: unmatched or ignored.
    matched_model = models.CharField(max_length=256, null=True, blank=True)
    synced_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ("category", "-publish_date", "-fitness", "model_name")
        constraints = (
            models.UniqueConstraint(
                fields=("source", "category", "model_name", "publish_date"),
                name="arena_score_key",
            ),
        )
        indexes = (models.Index(fields=("expires_at",), name="arena_score_expiry"),)

    def __str__(self) -> str:
        return f"{self.model_name} ({self.category}, {self.publish_date})"


class ArenaAlias(models.Model):
    """Staff's answer for one Arena name: a model id, or ``ignore`` (spec 06 §3.3).

    Keyed by the exact Arena name; the first name-matching rule of the sync.
    """

    IGNORE = "ignore"

    arena_name = models.CharField(max_length=256, unique=True)
    model_id = models.CharField(
        max_length=256, help_text='A catalog or configured model id, or "ignore".'
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("arena_name",)
        verbose_name_plural = "arena aliases"

    def __str__(self) -> str:
        return f"{self.arena_name} -> {self.model_id}"

    @property
    def is_ignore(self) -> bool:
        return self.model_id == self.IGNORE
