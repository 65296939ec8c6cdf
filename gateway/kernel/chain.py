"""Chains and slot plans (spec 02 §2, §4, §5; 03 §1.2, §4).

* ``build_chain``: the request's entries (or the key's ``failover_defaults``) resolved,
  allow-list checked and de-duplicated by identity.  Problems raise ``ChainError`` with
  the status, code and param of spec 02 §3 rows 12-14.
* ``plan_targets``: the ordered targets one slot tries.  Direct models: every active
  connection by priority, provider slug, connection name.  Combos: declared order with
  combo-refs expanded in place (the per-strategy ordering of spec 03 §5 replaces this
  in the combos work).  ``auto``: every servable candidate in configured order until the
  scoring engine lands.
* ``effective_options``: the first defined value by the precedence of spec 02 §4.

All functions are pure over the routing table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.kernel.autoids import UnknownAutoVariant
from gateway.kernel.errors import RETRYABLE_REASONS
from gateway.kernel.globs import matches
from gateway.kernel.rendezvous import rendezvous_order
from gateway.kernel.resolve import ModelNotFound, Resolved, RouteKind, resolve
from gateway.kernel.types import (
    ComboInfo,
    KeyPolicy,
    ProviderInfo,
    RoutingTable,
    Target,
)

MAX_COMBO_DEPTH = 3  # spec 03 §2.1
ALL_REASONS: tuple[str, ...] = tuple(r.value for r in RETRYABLE_REASONS)


class ChainError(Exception):
    def __init__(self, status: int, code: str, param: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param
        self.message = message
        self.error_type = {400: "invalid_request_error", 403: "permission_error"}.get(
            status, "not_found_error"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EntrySpec:
    model: str
    param: str
    timeout_ms: int | None = None
    first_token_timeout_ms: int | None = None
    #: the smart alias this entry was sent as (spec 05 §2.1); ``model`` is its target
    alias: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    entry: EntrySpec
    resolved: Resolved


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    timeout_ms: int
    first_token_timeout_ms: int | None
    on: tuple[str, ...]


def is_allowed(key: KeyPolicy, sent: str, resolved: Resolved) -> bool:
    """Spec 03 §1.2: the globs match the string as sent or its resolved form."""
    if key.allowed_regexes is None:
        return True
    return any(
        matches(regex, sent) or matches(regex, resolved.resolved_name)
        for regex in key.allowed_regexes
    )


def _refusal(entry: EntrySpec, problem: LookupError | ValueError) -> ChainError:
    if isinstance(problem, UnknownAutoVariant):
        return ChainError(400, "unknown_auto_variant", entry.param, str(problem))
    return ChainError(
        404,
        "model_not_found",
        entry.param,
        f"The model '{entry.model}' does not exist",
    )


def _not_allowed(entry: EntrySpec) -> ChainError:
    return ChainError(
        403,
        "model_not_allowed",
        entry.param,
        f"This API key is not allowed to use '{entry.model}'",
    )


def resolve_entry(table: RoutingTable, key: KeyPolicy, entry: EntrySpec) -> Resolved:
    """One entry through spec 02 §3 rows 12-14; raises ``ChainError``."""
    try:
        resolved = resolve(table, entry.model)
    except (UnknownAutoVariant, ModelNotFound) as exc:
        raise _refusal(entry, exc) from exc
    if not is_allowed(key, entry.model, resolved):
        raise _not_allowed(entry)
    return resolved


def resolve_entries(
    table: RoutingTable, key: KeyPolicy, entries: tuple[EntrySpec, ...]
) -> list[Slot]:
    """Rows 12, 13 and 14 of spec 02 §3 in that order, each over every entry.

    The first problem found is reported, so an unknown ``auto…`` id in a later entry
    is reported before an unknown model in an earlier one (as for rows 1-11).
    """
    outcomes: list[Resolved | UnknownAutoVariant | ModelNotFound] = []
    for entry in entries:
        try:
            outcomes.append(resolve(table, entry.model))
        except (UnknownAutoVariant, ModelNotFound) as exc:
            outcomes.append(exc)
    for row in (UnknownAutoVariant, ModelNotFound):
        for entry, outcome in zip(entries, outcomes, strict=True):
            if isinstance(outcome, row):
                raise _refusal(entry, outcome)
    slots = [
        Slot(entry=entry, resolved=outcome)
        for entry, outcome in zip(entries, outcomes, strict=True)
        if isinstance(outcome, Resolved)
    ]
    for slot in slots:
        alias = slot.entry.alias
        if alias is not None:  # spec 05 §2.1: the alias as sent, not its target
            regexes = key.allowed_regexes
            if regexes is not None and not any(matches(r, alias) for r in regexes):
                raise _not_allowed(replace(slot.entry, model=alias))
        elif not is_allowed(key, slot.entry.model, slot.resolved):
            raise _not_allowed(slot.entry)
    return slots


def _entry_identity(table: RoutingTable, entry: EntrySpec) -> str | None:
    """Spec 02 §2 identity of an entry as sent; a smart alias is itself until the
    chain is built (spec 05 §2.1); None when it does not resolve."""
    if entry.model in table.smart_routes:
        return f"alias:{entry.model}"
    try:
        return resolve(table, entry.model).identity
    except (UnknownAutoVariant, ModelNotFound):
        return None


def with_defaults(
    table: RoutingTable,
    key: KeyPolicy,
    entries: tuple[EntrySpec, ...],
    warnings: list[str],
) -> tuple[EntrySpec, ...]:
    """Spec 02 §2 rule 3 on the entries as sent: a single ``model`` equal (by
    identity) to an entry of the key's ``failover_defaults.models`` continues with
    the entries after it.  Smart aliases are matched as sent and substituted later.
    Stale default entries are dropped and reported through ``warnings``."""
    defaults = key.failover_defaults
    if defaults is None or not defaults.models or len(entries) != 1:
        return entries
    first = _entry_identity(table, entries[0])
    if first is None:
        return entries  # its refusal comes when the chain is resolved
    usable: list[EntrySpec] = []
    stale: list[str] = []
    for index, model in enumerate(defaults.models):
        spec = EntrySpec(model=model, param=f"failover_defaults.models[{index}]")
        try:
            if model not in table.smart_routes:
                resolve_entry(table, key, spec)
            usable.append(spec)
        except ChainError:
            stale.append(f"'{model}'")
    if stale:  # spec 02 §2: one line per request, naming the key and the entries
        warnings.append(
            f"key {key.name}: dropping stale failover default entries "
            + ", ".join(stale)
        )
    for index, spec in enumerate(usable):
        if _entry_identity(table, spec) == first:
            return (entries[0], *usable[index + 1 :])
    return entries


def build_chain(
    table: RoutingTable,
    key: KeyPolicy,
    entries: tuple[EntrySpec, ...],
    *,
    explicit: bool,
    warnings: list[str],
) -> list[Slot]:
    """Resolve the chain (spec 02 §2 rules 1-4); duplicates collapse to the first.

    ``explicit`` is true for rules 1-2 (``models``, ``fallback_models``) and for
    entries ``with_defaults`` has already extended; otherwise the key's
    ``failover_defaults`` may extend a single ``model`` (rule 3) here.  An entry
    substituted for a smart alias keeps the alias as its identity, so duplicates
    are those of the chain as sent (spec 05 §2.1).
    """
    if not explicit:
        entries = with_defaults(table, key, entries, warnings)
    slots = resolve_entries(table, key, entries)
    seen: set[str] = set()
    unique: list[Slot] = []
    for slot in slots:
        alias = slot.entry.alias
        identity = f"alias:{alias}" if alias is not None else slot.resolved.identity
        if identity not in seen:
            seen.add(identity)
            unique.append(slot)
    return unique


def connection_order(targets: list[Target], cache_key: str | None) -> list[Target]:
    """Spec 02 §5, 03 §4.1: connection ``priority`` ascending, then provider slug,
    then connection name; with a cache key (``promptcache_affinity`` on), equal-
    priority connections of one provider by rendezvous score on it instead of name.
    """
    ordered = sorted(
        targets,
        key=lambda t: (t.connection.priority, t.provider.slug, t.connection.name),
    )
    if cache_key is None or len(ordered) < 2:  # noqa: PLR2004
        return ordered
    rank = {
        k: i
        for i, k in enumerate(rendezvous_order(cache_key, [t.key for t in ordered]))
    }
    return sorted(
        ordered,
        key=lambda t: (t.connection.priority, t.provider.slug, rank[t.key]),
    )


def _model_targets(
    provider: ProviderInfo,
    model_id: str,
    *,
    connection: str | None = None,
    via: str | None = None,
    timeout_ms: int | None = None,
) -> list[Target]:
    model = provider.models.get(model_id)
    if model is None:
        return []
    return [
        Target(
            provider=provider,
            model=model,
            connection=conn,
            via=via,
            timeout_ms=timeout_ms,
        )
        for conn in provider.connections
        if (connection is None or conn.name == connection)
        and provider.serves(model, conn)
    ]


def _combo_targets(
    table: RoutingTable, combo: ComboInfo, depth: int, warnings: list[str]
) -> list[Target]:
    result: list[Target] = []
    for target in combo.targets:
        if target.ref is not None:
            inner = table.combos.get(target.ref.lower())
            if inner is not None and inner.active and depth < MAX_COMBO_DEPTH:
                result.extend(_combo_targets(table, inner, depth + 1, warnings))
            continue
        slug, _, model_id = (target.model or "").partition("/")
        provider = table.providers.get(slug.lower())
        found = (
            _model_targets(
                provider,
                model_id,
                connection=target.connection,
                via=combo.name,
                timeout_ms=target.timeout_ms,
            )
            if provider is not None
            else []
        )
        if provider is None or model_id not in provider.models:
            warnings.append(
                f"combo {combo.name}: target {target.model} left the catalog"
            )
        result.extend(found)
    return result


def _auto_targets(table: RoutingTable, route_id: str) -> list[Target]:
    result: list[Target] = []
    for provider in table.providers.values():
        for model_id in provider.models:
            result.extend(_model_targets(provider, model_id, via=route_id))
    return sorted(
        result,
        key=lambda t: (
            t.connection.priority,
            t.provider.slug,
            t.connection.name,
            t.model.position,
        ),
    )


def plan_targets(
    table: RoutingTable,
    slot: Slot,
    warnings: list[str],
    cache_key: str | None = None,
) -> list[Target]:
    """A direct slot's targets in connection order (``cache_key``: ``K`` of the
    request when ``promptcache_affinity`` is on, else None)."""
    resolved = slot.resolved
    if resolved.kind is RouteKind.COMBO and resolved.combo is not None:
        return _combo_targets(table, resolved.combo, 1, warnings)
    if resolved.kind is RouteKind.AUTO and resolved.auto_id is not None:
        return _auto_targets(table, resolved.auto_id)
    targets: list[Target] = []
    for model in resolved.models:
        provider = table.providers[model.provider.lower()]
        targets.extend(_model_targets(provider, model.model_id))
    return connection_order(targets, cache_key)


def effective_options(
    table: RoutingTable,
    key: KeyPolicy,
    slot: Slot,
    target: Target,
    redundancy: tuple[int | None, int | None, tuple[str, ...] | None],
) -> Options:
    """Spec 02 §4: entry, request ``redundancy``, combo target, key, settings."""
    r_timeout, r_first, r_on = redundancy
    defaults = key.failover_defaults
    d_timeout = defaults.timeout_ms if defaults else None
    d_first = defaults.first_token_timeout_ms if defaults else None
    d_on = defaults.on if defaults else None
    timeout = next(
        v
        for v in (
            slot.entry.timeout_ms,
            r_timeout,
            target.timeout_ms,
            d_timeout,
            table.settings.attempt_timeout_ms,
        )
        if v is not None
    )
    first = next(
        (
            v
            for v in (slot.entry.first_token_timeout_ms, r_first, d_first)
            if v is not None
        ),
        None,
    )
    on = r_on if r_on is not None else (d_on if d_on is not None else ALL_REASONS)
    return Options(timeout_ms=timeout, first_token_timeout_ms=first, on=on)
