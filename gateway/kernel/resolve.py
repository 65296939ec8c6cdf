"""Model string -> route (spec 03 §1.1).

``resolve(table, text)`` walks the resolution order; the first step that matches wins:

1. an active combo of that exact name; 2. ignoring case; 3. ``combo/<name>`` (no
fall-through: an unknown name is a 404); 4. model->combo mappings by priority; 5. the
built-in ``auto…`` ids (an invalid one is a 400, no fall-through); 6. ``<slug>/<model>``
of a provider; 7. a bare model id served by one or more providers.

Smart aliases (step 0) are rewritten by the caller before ``resolve`` is called.
A model that no active connection serves is unknown.  Invariant: the function reads
only the table; it never consults health state (that is the planner's job).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.kernel.autoids import UnknownAutoVariant, is_auto_id, parse_auto_id
from gateway.kernel.globs import matches
from gateway.kernel.types import ComboInfo, ModelInfo, RoutingTable

__all__ = ["ModelNotFound", "Resolved", "RouteKind", "UnknownAutoVariant", "resolve"]

_COMBO_PREFIX = "combo/"


class RouteKind(StrEnum):
    DIRECT = "direct"
    COMBO = "combo"
    AUTO = "auto"


class ModelNotFound(LookupError):
    """The model string does not resolve (404 ``model_not_found``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    kind: RouteKind
    #: identity used for de-duplication and metric labels (spec 02 §2)
    identity: str
    #: ``omniroute.route`` for a single-entry request
    route: str
    #: the resolved form matched by allow-lists (provider/model, combo name, auto id)
    resolved_name: str
    combo: ComboInfo | None = None
    models: tuple[ModelInfo, ...] = ()
    auto_id: str | None = None


def _combo(combo: ComboInfo) -> Resolved:
    return Resolved(
        kind=RouteKind.COMBO,
        identity=f"combo:{combo.name}",
        route=f"combo:{combo.name}",
        resolved_name=combo.name,
        combo=combo,
    )


def _active_combo(table: RoutingTable, name: str) -> ComboInfo | None:
    combo = table.combos.get(name.lower())
    return combo if combo is not None and combo.active else None


def _provider_model(table: RoutingTable, slug: str, model: str) -> ModelInfo | None:
    provider = table.providers.get(slug.lower())
    if provider is None or not provider.connections:
        return None
    found = provider.models.get(model)
    if found is not None:
        return found
    candidates = provider.models_lower.get(model.lower(), ())
    if len(candidates) == 1:
        return provider.models[candidates[0]]
    return None


def _direct(models: tuple[ModelInfo, ...], bare: str | None) -> Resolved:
    identity = models[0].key if len(models) == 1 or bare is None else f"*/{bare}"
    return Resolved(
        kind=RouteKind.DIRECT,
        identity=identity,
        route="direct",
        resolved_name=identity if bare is None or len(models) > 1 else models[0].key,
        models=models,
    )


def _bare(table: RoutingTable, text: str) -> Resolved:
    pairs = table.bare_models.get(text.lower(), ())
    found: list[ModelInfo] = []
    for slug, _model_id in pairs:
        model = _provider_model(table, slug, text)
        if model is not None and model not in found:
            found.append(model)
    if not found:
        raise ModelNotFound(text)
    return _direct(tuple(found), found[0].model_id)


def resolve(table: RoutingTable, text: str) -> Resolved:
    """Resolve one model string; raises ``ModelNotFound`` or ``UnknownAutoVariant``."""
    combo = _active_combo(table, text)
    if combo is not None:
        return _combo(combo)
    if text[: len(_COMBO_PREFIX)].lower() == _COMBO_PREFIX:
        combo = _active_combo(table, text[len(_COMBO_PREFIX) :])
        if combo is None:
            raise ModelNotFound(text)
        return _combo(combo)
    for mapping in table.mappings:
        if matches(mapping.regex, text):
            combo = _active_combo(table, mapping.combo)
            if combo is not None:
                return _combo(combo)
    if is_auto_id(text):
        route_id = parse_auto_id(text)
        return Resolved(
            kind=RouteKind.AUTO,
            identity=route_id,
            route=route_id,
            resolved_name=route_id,
            auto_id=route_id,
        )
    slug, sep, rest = text.partition("/")
    if sep and rest and slug.lower() in table.providers:
        model = _provider_model(table, slug, rest)
        if model is None:
            raise ModelNotFound(text)
        return _direct((model,), None)
    return _bare(table, text)
