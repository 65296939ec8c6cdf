"""``sync_models_dev``: models.dev into ``CatalogModel`` rows (spec 06 §3.2).

Four steps, each a plain function:

1. fetch: ``read_source`` of ``OMNIROUTE_MODELS_DEV_URL`` (or ``--source``);
2. ``parse(payload)``: pure, bytes -> ``ParsedCatalog``.  A provider or model whose
   read fields are missing or of the wrong type is skipped and counted ``rejected``;
   unknown keys are ignored; ``capabilities``, ``reasoning_efforts`` and
   ``model_class`` are derived here;
3. ``plan(parsed, existing)``: pure diff -> create / update / unchanged / missing;
4. ``apply(plan)``: one transaction, upserts in batches of 1 000, bumps the config
   revision when routing data changed.

Invariants: a payload that is not a JSON object, or has fewer providers than
``OMNIROUTE_MODELS_DEV_MIN_PROVIDERS``, fails the run and writes nothing; the same
payload as the last successful run is ``unchanged`` and writes nothing; rows are
never deleted: a row absent from a good payload keeps its values and gets
``missing_since`` (cleared when it comes back); rows of rejected entries are left
exactly as stored.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from providers.jobs import (
    JobContext,
    JobError,
    JobResult,
    JobSpec,
    Outcome,
    Progress,
    last_payload_sha256,
    read_source,
    register,
)
from providers.models import CatalogModel
from providers.payload import (
    Invalid,
    read_count,
    read_flag,
    read_list,
    read_object,
    read_price,
    read_strings,
    read_text,
)
from providers.services import bump_config_revision

JOB_NAME = "sync_models_dev"
SOFT_LIMIT_SECONDS = 120  # spec 06 §3.1
HARD_LIMIT_SECONDS = 180
BATCH_ROWS = 1000  # spec 06 §3.2
MAX_MODEL_ID_CHARS = 256
MAX_PROVIDER_ID_CHARS = 128
STANDARD_MIN_CONTEXT = 128_000  # model_class: tools with a window ≥ 128 000
Key = tuple[str, str]  # (source_provider, model_id)


class PayloadError(JobError):
    """The payload as a whole is unusable: the run fails, nothing is written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogRow:
    """The stored values of one ``CatalogModel`` (bookkeeping fields aside)."""

    source_provider: str
    model_id: str
    provider_name: str
    provider_npm: str
    provider_api: str
    provider_doc: str
    name: str
    family: str
    attachment: bool
    reasoning: bool
    reasoning_options: list[Any] | None
    tool_call: bool
    structured_output: bool | None
    temperature: bool | None
    knowledge: str
    release_date: str
    last_updated: str
    input_modalities: list[str]
    output_modalities: list[str]
    open_weights: bool
    context_window: int
    input_limit: int | None
    output_limit: int
    status: str
    input_cost: float | None
    output_cost: float | None
    cache_read_cost: float | None
    cache_write_cost: float | None
    reasoning_cost: float | None
    cost_tiers: list[dict[str, Any]]
    capabilities: list[str]
    reasoning_efforts: list[str]
    model_class: str

    @property
    def key(self) -> Key:
        return (self.source_provider, self.model_id)

    def values(self) -> dict[str, Any]:
        return asdict(self)


DATA_FIELDS = tuple(f.name for f in fields(CatalogRow))


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedCatalog:
    rows: tuple[CatalogRow, ...]
    provider_count: int  # top-level entries, valid or not (the sanity rule)
    rejected: int
    rejected_keys: frozenset[Key]  # models kept as stored
    rejected_providers: frozenset[str]  # providers whose rows are kept as stored


# Parsing.


_PRICE_FIELDS = (
    "input_cost",
    "output_cost",
    "cache_read_cost",
    "cache_write_cost",
    "reasoning_cost",
)


def _costs(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    if raw is None:  # no ``cost``: unpriced, never free
        return dict.fromkeys(_PRICE_FIELDS) | {"cost_tiers": []}
    tiers = []
    for entry in read_list(raw, "tiers", required=False) or ():
        if not isinstance(entry, dict):
            raise Invalid("cost.tiers holds a non-object")
        tier = read_object(entry, "tier")
        tiers.append(
            {
                "type": read_text(tier, "type"),
                "size": read_count(tier, "size"),
                **_tier_prices(entry),
            }
        )
    return {
        "input_cost": read_price(raw, "input"),
        "output_cost": read_price(raw, "output"),
        "cache_read_cost": read_price(raw, "cache_read", required=False),
        "cache_write_cost": read_price(raw, "cache_write", required=False),
        "reasoning_cost": read_price(raw, "reasoning", required=False),
        "cost_tiers": tiers,
    }


def _tier_prices(entry: Mapping[str, Any]) -> dict[str, float]:
    prices = {
        "input": read_price(entry, "input"),
        "output": read_price(entry, "output"),
    }
    for key in ("cache_read", "cache_write", "reasoning"):
        prices[key] = read_price(entry, key, required=False)
    return {k: v for k, v in prices.items() if v is not None}


def _efforts(options: list[Any] | None) -> list[str]:
    for entry in options or ():
        if not isinstance(entry, dict):
            raise Invalid("reasoning_options holds a non-object")
        if entry.get("type") == "effort":
            return read_strings(entry, "values")
    return []


def model_class(*, reasoning: bool, tool_call: bool, context_window: int) -> str:
    """premium / standard / fast / budget (spec 06 §3.2)."""
    if reasoning:
        return CatalogModel.ModelClass.PREMIUM
    if tool_call and context_window >= STANDARD_MIN_CONTEXT:
        return CatalogModel.ModelClass.STANDARD
    if tool_call:
        return CatalogModel.ModelClass.FAST
    return CatalogModel.ModelClass.BUDGET


def _capabilities(
    *, tool_call: bool, inputs: list[str], reasoning: bool, structured: bool | None
) -> list[str]:
    flags = (
        ("tools", tool_call),
        ("vision", "image" in inputs),
        ("reasoning", reasoning),
        ("json", structured is True),
    )
    return [name for name, present in flags if present]


def _model(raw: Any, provider: Mapping[str, Any]) -> CatalogRow:
    if not isinstance(raw, dict):
        raise Invalid("model is not an object")
    model_id = read_text(raw, "id")
    if not model_id or len(model_id) > MAX_MODEL_ID_CHARS:
        raise Invalid("id is empty or longer than 256 characters")
    modalities = read_object(raw, "modalities")
    limit = read_object(raw, "limit")
    reasoning = bool(read_flag(raw, "reasoning"))
    tool_call = bool(read_flag(raw, "tool_call"))
    structured = read_flag(raw, "structured_output", required=False)
    inputs = read_strings(modalities, "input")
    context_window = read_count(limit, "context") or 0
    options = read_list(raw, "reasoning_options", required=False)
    return CatalogRow(
        **provider,
        model_id=model_id,
        name=read_text(raw, "name"),
        family=read_text(raw, "family", required=False),
        attachment=bool(read_flag(raw, "attachment")),
        reasoning=reasoning,
        reasoning_options=options,
        tool_call=tool_call,
        structured_output=structured,
        temperature=read_flag(raw, "temperature", required=False),
        knowledge=read_text(raw, "knowledge", required=False),
        release_date=read_text(raw, "release_date"),
        last_updated=read_text(raw, "last_updated"),
        input_modalities=inputs,
        output_modalities=read_strings(modalities, "output"),
        open_weights=bool(read_flag(raw, "open_weights")),
        context_window=context_window,
        input_limit=read_count(limit, "input", required=False),
        output_limit=read_count(limit, "output") or 0,
        status=read_text(raw, "status", required=False),
        **_costs(read_object(raw, "cost", required=False)),
        capabilities=_capabilities(
            tool_call=tool_call,
            inputs=inputs,
            reasoning=reasoning,
            structured=structured,
        ),
        reasoning_efforts=_efforts(options),
        model_class=model_class(
            reasoning=reasoning, tool_call=tool_call, context_window=context_window
        ),
    )


def _provider(raw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(raw, dict):
        raise Invalid("provider is not an object")
    provider_id = read_text(raw, "id")
    if not provider_id or len(provider_id) > MAX_PROVIDER_ID_CHARS:
        raise Invalid("id is empty or longer than 128 characters")
    fields_ = {
        "source_provider": provider_id,
        "provider_name": read_text(raw, "name"),
        "provider_npm": read_text(raw, "npm"),
        "provider_api": read_text(raw, "api", required=False),
        "provider_doc": read_text(raw, "doc"),
    }
    return fields_, read_object(raw, "models")


def parse(payload: bytes) -> ParsedCatalog:
    """models.dev ``api.json`` -> rows; raises ``PayloadError`` when it is not a
    JSON object.  Pure."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise PayloadError(f"models.dev: payload is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PayloadError("models.dev: payload is not a JSON object")
    rows: dict[Key, CatalogRow] = {}
    rejected_keys: set[Key] = set()
    rejected_providers: set[str] = set()
    for provider_key, raw_provider in data.items():
        try:
            provider, models = _provider(raw_provider)
        except Invalid:
            rejected_providers.add(provider_key)
            continue
        for model_key, raw_model in models.items():
            try:
                row = _model(raw_model, provider)
            except Invalid:
                rejected_keys.add((provider["source_provider"], model_key))
                continue
            if row.key in rows:  # a duplicate id: the first one stands
                rejected_keys.add(row.key)
                continue
            rows[row.key] = row
    return ParsedCatalog(
        rows=tuple(rows.values()),
        provider_count=len(data),
        rejected=len(rejected_keys) + len(rejected_providers),
        rejected_keys=frozenset(rejected_keys),
        rejected_providers=frozenset(rejected_providers),
    )


# Planning and applying.


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    create: tuple[CatalogRow, ...] = ()
    update: tuple[CatalogRow, ...] = ()  # a stored value changed, or it came back
    unchanged: tuple[CatalogRow, ...] = ()
    missing: tuple[Key, ...] = ()  # stored rows absent from the payload
    newly_missing: tuple[Key, ...] = ()  # … whose missing_since is not set yet
    rejected: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "created": len(self.create),
            "updated": len(self.update),
            "unchanged": len(self.unchanged),
            "missing": len(self.missing),
            "rejected": self.rejected,
            "deleted": 0,  # never: only staff delete catalog rows
        }

    @property
    def changes_routing_data(self) -> bool:
        return bool(self.create or self.update)


def plan(parsed: ParsedCatalog, existing: Mapping[Key, Mapping[str, Any]]) -> Plan:
    """Diff parsed rows against stored ones (``DATA_FIELDS`` + ``missing_since``,
    keyed by ``(source_provider, model_id)``).  Pure."""
    create, update, unchanged = [], [], []
    for row in parsed.rows:
        stored = existing.get(row.key)
        if stored is None:
            create.append(row)
        elif stored.get("missing_since") is not None or any(
            stored.get(name) != value for name, value in row.values().items()
        ):
            update.append(row)
        else:
            unchanged.append(row)
    seen = {row.key for row in parsed.rows}
    missing = sorted(
        key
        for key in existing
        if key not in seen
        and key not in parsed.rejected_keys
        and key[0] not in parsed.rejected_providers
    )
    return Plan(
        create=tuple(create),
        update=tuple(update),
        unchanged=tuple(unchanged),
        missing=tuple(missing),
        newly_missing=tuple(
            key for key in missing if existing[key].get("missing_since") is None
        ),
        rejected=parsed.rejected,
    )


def stored_rows() -> dict[Key, dict[str, Any]]:
    """What ``plan`` compares against: every stored row's data and missing_since."""
    return {
        (row["source_provider"], row["model_id"]): row
        for row in CatalogModel.objects.values(*DATA_FIELDS, "missing_since")
    }


def _batches(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@transaction.atomic
def apply(the_plan: Plan, *, now: datetime, progress: Progress | None = None) -> None:
    """Write a plan in one transaction: upsert every present row (values,
    ``last_seen_at``, cleared ``missing_since``), mark newly missing rows."""
    present = [*the_plan.create, *the_plan.update, *the_plan.unchanged]
    objects = [
        CatalogModel(
            **row.values(), first_seen_at=now, last_seen_at=now, missing_since=None
        )
        for row in present
    ]
    done = 0
    for batch in _batches(objects, BATCH_ROWS):
        CatalogModel.objects.bulk_create(
            batch,
            update_conflicts=True,
            unique_fields=("source_provider", "model_id"),
            update_fields=(*DATA_FIELDS[2:], "last_seen_at", "missing_since"),
        )
        done += len(batch)
        if progress is not None:
            progress(done, len(objects))
    by_provider: dict[str, list[str]] = defaultdict(list)
    for source_provider, model_id in the_plan.newly_missing:
        by_provider[source_provider].append(model_id)
    for source_provider, model_ids in by_provider.items():
        for batch in _batches(model_ids, BATCH_ROWS):
            CatalogModel.objects.filter(
                source_provider=source_provider,
                model_id__in=batch,
                missing_since__isnull=True,
            ).update(missing_since=now)
    if the_plan.changes_routing_data:
        bump_config_revision()  # gateways rebuild their tables within 2 s


# The job.


def summary(parsed: ParsedCatalog, the_plan: Plan) -> str:
    counts = the_plan.counts()
    rejected = f", {counts['rejected']} rejected" if counts["rejected"] else ""
    return (
        f"models.dev: {len(parsed.rows)} models ({counts['created']} created, "
        f"{counts['updated']} updated, {counts['unchanged']} unchanged, "
        f"{counts['missing']} missing{rejected})"
    )


def sync_models_dev(
    context: JobContext, *, clock: Callable[[], datetime] = timezone.now
) -> JobResult:
    source = context.source or settings.OMNIROUTE_MODELS_DEV_URL
    payload = read_source(source)
    sha = hashlib.sha256(payload).hexdigest()
    if not context.dry_run and sha == last_payload_sha256(JOB_NAME):
        return JobResult(
            outcome=Outcome.UNCHANGED,
            counts=Plan().counts(),  # every count of spec 06 §3.1, all zero
            message="models.dev: unchanged (same payload as the last successful run)",
            payload_sha256=sha,
        )
    parsed = parse(payload)
    minimum = settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS
    if parsed.provider_count < minimum:
        raise PayloadError(
            f"models.dev: {parsed.provider_count} providers, fewer than the "
            f"minimum of {minimum}; nothing written"
        )
    the_plan = plan(parsed, stored_rows())
    text = summary(parsed, the_plan)
    if context.dry_run:
        return JobResult(
            outcome=Outcome.DRY_RUN,
            counts=the_plan.counts(),
            message=f"{text} (dry run, nothing written)",
            payload_sha256=sha,
        )
    if context.past_soft_limit():
        raise JobError("models.dev: soft time limit reached before writing")
    apply(the_plan, now=clock(), progress=context.progress)
    return JobResult(
        outcome=Outcome.SUCCESS,
        counts=the_plan.counts(),
        message=text,
        payload_sha256=sha,
    )


JOB = register(
    JobSpec(
        name=JOB_NAME,
        func=sync_models_dev,
        soft_s=SOFT_LIMIT_SECONDS,
        hard_s=HARD_LIMIT_SECONDS,
        schedule="17 */6 * * *",
        task="providers.tasks.sync_models_dev_task",
    )
)
