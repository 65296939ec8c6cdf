"""Catalog data for configured models: the match rule and the merge (spec 06 §3.2).

A configured model ``(provider slug, model id)`` matches the first ``CatalogModel``
found at:

1. ``(slug, model id)``;
2. for providers of kind ``openai`` or ``anthropic``, ``(kind, model id)``;
3. ``(OMNIROUTE_CATALOG_PROVIDER_MAP[slug], model id)``.

The match only fills what the operator left empty (a null cost, window, output
limit or capability list, a blank tier <- ``model_class``); operator-set values always
win.  ``deprecated`` comes from the catalog alone.  Read by ``gateway.config.snapshot``
when it builds the routing table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.dialects import REGISTRY
from gateway.kernel.types import ModelInfo, PriceTier
from providers.models import CatalogModel

#: the kinds whose models the models.dev catalog describes (their dialects say so)
_KIND_SOURCES = frozenset(kind for kind, d in REGISTRY.items() if d.catalog)
_DEPRECATED = "deprecated"


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogFacts:
    """What routing takes from one catalog row."""

    input_cost: float | None = None
    output_cost: float | None = None
    cache_read_cost: float | None = None
    cache_write_cost: float | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: frozenset[str] = frozenset()
    tier: str | None = None
    deprecated: bool = False
    price_tiers: tuple[PriceTier, ...] = ()


def price_tiers(raw: Any) -> tuple[PriceTier, ...]:
    """``CatalogModel.cost_tiers`` as context tiers, ascending; others are skipped."""
    found = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, dict) or entry.get("type") != "context":
            continue
        size = entry.get("size")
        price_in, price_out = _price(entry.get("input")), _price(entry.get("output"))
        if not isinstance(size, int) or price_in is None or price_out is None:
            continue
        found.append(
            PriceTier(
                size=size,
                input_cost=price_in,
                output_cost=price_out,
                cache_read_cost=_price(entry.get("cache_read")),
                cache_write_cost=_price(entry.get("cache_write")),
            )
        )
    return tuple(sorted(found, key=lambda tier: tier.size))


def _price(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def sources_for(
    slug: str, kind: str, provider_map: Mapping[str, str]
) -> tuple[str, ...]:
    """The catalog provider ids to try for a configured provider, in order."""
    found: list[str] = [slug.lower()]
    if kind in _KIND_SOURCES:
        found.append(str(kind))
    mapped = provider_map.get(slug) or provider_map.get(slug.lower())
    if mapped:
        found.append(mapped)
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True)
class CatalogIndex:
    rows: Mapping[tuple[str, str], CatalogFacts]
    provider_map: Mapping[str, str]

    def match(self, slug: str, kind: str, model_id: str) -> CatalogFacts | None:
        for source in sources_for(slug, kind, self.provider_map):
            facts = self.rows.get((source, model_id))
            if facts is not None:
                return facts
        return None


def load_index(
    providers: Iterable[tuple[str, str]], provider_map: Mapping[str, str]
) -> CatalogIndex:
    """The catalog rows any of ``(slug, kind)`` may match, in one query."""
    sources = {
        s for slug, kind in providers for s in sources_for(slug, kind, provider_map)
    }
    rows = CatalogModel.objects.filter(source_provider__in=sources).values_list(
        "source_provider",
        "model_id",
        "input_cost",
        "output_cost",
        "cache_read_cost",
        "cache_write_cost",
        "context_window",
        "output_limit",
        "capabilities",
        "model_class",
        "status",
        "cost_tiers",
    )
    index = {
        (source, model_id): CatalogFacts(
            input_cost=input_cost,
            output_cost=output_cost,
            cache_read_cost=cache_read,
            cache_write_cost=cache_write,
            context_window=window,
            max_output_tokens=output_limit,
            capabilities=frozenset(caps) if isinstance(caps, list) else frozenset(),
            tier=model_class or None,
            deprecated=status == _DEPRECATED,
            price_tiers=price_tiers(tiers),
        )
        for (
            source,
            model_id,
            input_cost,
            output_cost,
            cache_read,
            cache_write,
            window,
            output_limit,
            caps,
            model_class,
            status,
            tiers,
        ) in rows
    }
    return CatalogIndex(rows=index, provider_map=dict(provider_map))


_T = TypeVar("_T")


def _operator_first(configured: _T | None, catalog: _T | None) -> _T | None:
    return catalog if configured is None else configured


def fill_model_info(info: ModelInfo, facts: CatalogFacts | None) -> ModelInfo:
    """``info`` with its empty fields taken from the catalog; operator values win."""
    if facts is None:
        return info
    return dataclasses.replace(
        info,
        input_cost=_operator_first(info.input_cost, facts.input_cost),
        output_cost=_operator_first(info.output_cost, facts.output_cost),
        cache_read_cost=_operator_first(info.cache_read_cost, facts.cache_read_cost),
        cache_write_cost=_operator_first(info.cache_write_cost, facts.cache_write_cost),
        context_window=_operator_first(info.context_window, facts.context_window),
        max_output_tokens=_operator_first(
            info.max_output_tokens, facts.max_output_tokens
        ),
        capabilities=_operator_first(info.capabilities, facts.capabilities),
        tier=_operator_first(info.tier, facts.tier),
        deprecated=facts.deprecated,
        # an operator's price is the whole price: catalog tiers only price with it
        price_tiers=facts.price_tiers
        if info.input_cost is None and info.output_cost is None
        else (),
    )
