"""Validation of combos and their ``config`` (spec 03 §2, 04 §2.2, 05 §3.7).

``validate_combo`` checks one combo in its YAML shape against a ``ConfigIndex``; the
index must already contain the combo itself (with its new references) so that cycle
and depth checks see the graph as it would be after the write.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.auto.engine import routers as router_strategies
from gateway.auto.engine.weights import FACTORS, MODE_PACKS, normalize_scoring_weights
from gateway.planning import strategies
from gateway.planning.strategies.traits import ConfigKey, Rule
from providers.validation import (
    COMBO_NAME,
    MAX_COMBO_DEPTH,
    MAX_TARGETS,
    RESERVED,
    Checker,
    ConfigIndex,
)

#: every ordering strategy, and every strategy whose sessions keep their target
ORDERING = strategies.ORDERING
PIN_CAPABLE = strategies.PIN_CAPABLE
BUDGET_FALLBACKS = ("cheapest", "cheapest-viable", "soft", "strict", "block", "hard")
COMBO_KEYS = frozenset({"name", "strategy", "active", "targets", "config"})
TARGET_KEYS = frozenset({"model", "combo", "connection", "weight", "timeout_ms"})
AUTO_KEYS = frozenset(
    {
        "weights",
        "modePack",
        "candidatePool",
        "explorationRate",
        "budgetCap",
        "budgetFallback",
        "routerStrategy",
        "maxAttempts",
        "preferTier",
        "complexityAware",
        "slaTargetP95Ms",
        "slaMaxErrorRate",
        "slaMaxCostPer1MTokens",
        "slaHardConstraints",
        "nadir",
    }
)

#: config key -> strategies that read it (from every strategy's ``Traits``)
CONFIG_USERS: dict[str, frozenset[str]] = strategies.config_users()
#: every config key a strategy declares with a scalar rule, checked alike
SCALAR_KEYS: tuple[ConfigKey, ...] = tuple(
    {
        key.name: key
        for spec in strategies.SPECS.values()
        for key in spec.traits.config_keys
        if key.rule is not Rule.CUSTOM
    }.values()
)


def canonical_strategy(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return strategies.canonical(value)


def _check_key(config: dict[str, Any], key: ConfigKey, check: Checker) -> None:
    if key.rule is Rule.BOOLEAN:
        check.boolean(config, key.name, key.default)
    elif key.rule is Rule.INTEGER:
        low, high = key.low or 0, key.high or 0  # both set by ``traits.integer``
        check.integer(config, key.name, int(low), int(high))
    elif key.rule is Rule.NUMBER:
        check.number(
            config,
            key.name,
            key.low,
            key.high,
            exclusive_low=key.exclusive_low,
            exclusive_high=key.exclusive_high,
        )
    elif key.rule is Rule.CHOICE:
        check.choice(config, key.name, key.choices)


def _check_scalar_config(config: dict[str, Any], check: Checker) -> None:
    for key in SCALAR_KEYS:
        _check_key(config, key, check)
    check_router_strategy(config, "routerStrategy", check)


def _check_nested(
    config: dict[str, Any], name: str, check: Checker, keys: frozenset[str]
) -> dict[str, Any] | None:
    value = config.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        check.error(name, "must be a mapping")
        return None
    check.unknown_keys(value, keys, prefix=f"{name}.")
    return value


def _check_composite_config(
    config: dict[str, Any], check: Checker, index: ConfigIndex, n_targets: int
) -> None:
    judge = check.string(config, "judgeModel")
    if judge is not None and not index.resolves(judge):
        check.error("judgeModel", f"unknown model or combo '{judge}'")
    tuning = _check_nested(
        config,
        "fusionTuning",
        check,
        frozenset({"minPanel", "stragglerGraceMs", "panelHardTimeoutMs"}),
    )
    if tuning is not None:
        sub = Checker(check.path("fusionTuning"))
        sub.integer(tuning, "minPanel", 1, 16)
        sub.integer(tuning, "stragglerGraceMs", 0, 120_000)
        sub.integer(tuning, "panelHardTimeoutMs", 1000, 300_000)
        check.problems += sub.problems
    prompts = config.get("stagePrompts")
    if prompts is not None:
        if not isinstance(prompts, list) or not all(
            p is None or isinstance(p, str) for p in prompts
        ):
            check.error("stagePrompts", "must be a list of strings or nulls")
        elif len(prompts) > n_targets:
            check.error("stagePrompts", "must not be longer than targets")
    agentic = _check_nested(
        config, "agenticOrchestration", check, frozenset({"enabled", "maxToolRounds"})
    )
    if agentic is not None:
        sub = Checker(check.path("agenticOrchestration"))
        sub.boolean(agentic, "enabled", False)
        sub.integer(agentic, "maxToolRounds", 1, 32)
        check.problems += sub.problems


def registered_router_strategies() -> tuple[str, ...]:
    """Every name ``routerStrategy`` accepts now: built-ins, aliases, then the custom
    strategies registered so far (spec 04 §8), in that order."""
    # The engine has no public listing of custom names yet; its registry is read here
    # and only here, so validation and routing cannot disagree about what exists.
    custom = router_strategies.registered_router_strategy_names()
    return (*router_strategies.BUILTIN_NAMES, *router_strategies.ALIASES, *custom)


def check_router_strategy(
    data: dict[str, Any], name: str, check: Checker
) -> str | None:
    """``data[name]`` if it is a registered router strategy name or alias (exact and
    case-sensitive, as the engine resolves it); otherwise a problem that lists the
    registered choices."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not router_strategies.is_known_strategy(value):
        check.error(
            name,
            f"must be one of: {', '.join(registered_router_strategies())} "
            f"(got {_shown(value)}; custom strategies are registered by the modules "
            "in OMNIROUTE_ROUTER_STRATEGY_MODULES)",
        )
        return None
    return value


def _shown(value: object) -> str:
    """A config value as the YAML or JSON author wrote it (``true``, ``"1"``)."""
    return json.dumps(value, default=str)


def _weight_problem(name: object, value: object) -> str | None:
    """The engine's verdict on one weight (``normalize_scoring_weights`` is the only
    rule), worded for its path; None when the engine accepts it."""
    if not isinstance(name, str) or name not in FACTORS:
        return "unknown factor; expected one of: " + ", ".join(FACTORS)
    try:
        normalize_scoring_weights({name: value})
    except ValueError:
        return f"must be a finite number >= 0, got {_shown(value)}"
    return None


def _check_weights(auto: dict[str, Any], check: Checker) -> None:
    weights = auto.get("weights")
    if weights is None:
        return
    if not isinstance(weights, dict):
        check.error("weights", "must be a mapping of factor -> number")
        return
    problems = [
        (name, problem)
        for name, value in weights.items()
        if (problem := _weight_problem(name, value)) is not None
    ]
    for name, problem in problems:
        check.error(f"weights.{name}", problem)
    if not problems:
        try:  # the map as a whole, in case the engine adds a rule across keys
            normalize_scoring_weights(weights)
        except ValueError as exc:
            check.error("weights", str(exc))
    if "modePack" in auto:
        check.error("weights", "cannot be combined with modePack")


def _check_auto(config: dict[str, Any], check: Checker) -> None:
    auto = _check_nested(config, "auto", check, AUTO_KEYS)
    if auto is None:
        return
    sub = Checker(check.path("auto"))
    _check_weights(auto, sub)
    sub.choice(auto, "modePack", tuple(MODE_PACKS))
    sub.string_list(auto, "candidatePool")
    sub.number(auto, "explorationRate", 0, 1)
    sub.number(auto, "budgetCap", 0, None, exclusive_low=True)
    sub.choice(auto, "budgetFallback", BUDGET_FALLBACKS)
    router = check_router_strategy(auto, "routerStrategy", sub)
    sub.integer(auto, "maxAttempts", 1, 10)
    sub.choice(auto, "preferTier", ("free", "cheap", "premium"))
    sub.boolean(auto, "complexityAware", False)
    sub.number(auto, "slaTargetP95Ms", 0, None, exclusive_low=True)
    sub.number(auto, "slaMaxErrorRate", 0, 1)
    sub.number(auto, "slaMaxCostPer1MTokens", 0, None, exclusive_low=True)
    sub.boolean(auto, "slaHardConstraints", False)
    nadir = _check_nested(
        auto, "nadir", sub, frozenset({"apiKey", "baseUrl", "timeoutMs"})
    )
    if nadir is not None:
        inner = Checker(sub.path("nadir"))
        inner.string(nadir, "apiKey")
        base = inner.string(nadir, "baseUrl", max_len=500)
        if base is not None and not base.lower().startswith(("http://", "https://")):
            inner.error("baseUrl", "must be an http or https URL")
        inner.integer(nadir, "timeoutMs", 100, 30_000)
        sub.problems += inner.problems
    top = config.get("routerStrategy")
    if (
        isinstance(top, str)
        and router is not None
        and router_strategies.is_known_strategy(top)
        and router_strategies.canonical_name(top)
        != router_strategies.canonical_name(router)
    ):  # one strategy under two of its names (cost and eco) is the same strategy
        check.error(
            "routerStrategy", "must equal auto.routerStrategy when both are set"
        )
    check.problems += sub.problems


def validate_config(
    config: Any, strategy: str, check: Checker, index: ConfigIndex, n_targets: int
) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, dict):
        check.error("config", "must be a mapping")
        return {}
    sub = Checker(check.path("config"))
    for key in config:
        users = CONFIG_USERS.get(key)
        if users is None:
            sub.error(key, "unknown key")
        elif strategy not in users:
            sub.warn(key, f"not used by strategy '{strategy}'; kept and ignored")
    _check_scalar_config(config, sub)
    _check_composite_config(config, sub, index, n_targets)
    _check_auto(config, sub)
    check.problems += sub.problems
    check.warnings += sub.warnings
    return dict(config)


def _validate_target(  # noqa: C901, PLR0912
    item: Any, check: Checker, index: ConfigIndex, strategy: str
) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        check.error("", "must be a mapping")
        return None
    check.unknown_keys(item, TARGET_KEYS)
    has_model, has_combo = "model" in item, "combo" in item
    if has_model == has_combo:
        check.error("model", "exactly one of 'model' or 'combo' is required")
        return None
    out: dict[str, Any] = {"weight": check.number(item, "weight", 0, 1_000_000)}
    if has_combo:
        name = check.string(item, "combo", required=True)
        for extra in ("connection", "timeout_ms"):
            if extra in item:
                check.error(extra, "is not allowed on a combo-ref")
        if strategy == "auto":
            check.error("combo", "an auto combo cannot reference other combos")
        elif name is not None and name.lower() not in index.combos:
            check.error("combo", f"unknown combo '{name}'")
        out["combo"] = (
            index.combos[name.lower()][0]
            if name and (name.lower() in index.combos)
            else name
        )
        return out
    model = check.string(item, "model", required=True)
    out["timeout_ms"] = check.integer(item, "timeout_ms", 1000, 300_000)
    connection = check.string(item, "connection", max_len=64)
    if model is not None:
        slug, sep, rest = model.partition("/")
        provider = index.providers.get(slug.lower())
        if not sep or not rest:
            check.error("model", f"'{model}' must be provider/model")
        elif provider is None:
            check.error("model", f"unknown provider '{slug}'")
        elif rest not in provider[2]:
            check.error("model", f"unknown model '{rest}' of provider '{provider[0]}'")
        else:
            model = f"{provider[0]}/{rest}"
            if connection is not None and connection not in provider[1]:
                check.error(
                    "connection",
                    f"unknown connection '{connection}' of provider '{provider[0]}'",
                )
    out["model"], out["connection"] = model, connection
    return out


def _target_key(target: dict[str, Any]) -> str:
    if target.get("combo"):
        return f"combo:{str(target['combo']).lower()}"
    return f"{target.get('model')}@{target.get('connection') or '*'}"


def reference_problem(
    index: ConfigIndex, name: str, targets: list[dict[str, Any]] | None = None
) -> tuple[int, str] | None:
    """(target index, message) of the first cycle or over-deep chain through ``name``.

    Chains are checked downwards from ``name`` and, once that is clean, from the
    longest chain of combos referring to it, so extending a chain at its bottom is
    caught too.  With ``targets`` (the combo's targets in declared order) the index
    is that of the combo-ref target; without, it counts combo-refs only.
    """
    start = name.lower()
    refs = index.combos[start][2]
    above = _referrer_chain(index, start, frozenset())
    for head in ([start], above):
        for position, ref in enumerate(refs):
            found = _walk(index, [*head, ref])
            if found is not None:
                return _target_index(targets, position), found
    return None


def _target_index(targets: list[dict[str, Any]] | None, ref_position: int) -> int:
    if targets is None:
        return ref_position
    positions = [i for i, t in enumerate(targets) if t.get("combo")]
    return positions[ref_position] if ref_position < len(positions) else ref_position


def _referrer_chain(index: ConfigIndex, name: str, seen: frozenset[str]) -> list[str]:
    """The longest chain of referring combos ending at ``name`` (cycles cut)."""
    longest: list[str] = []
    for parent, (_canonical, _strategy, refs) in index.combos.items():
        if name in refs and parent not in seen and parent != name:
            chain = _referrer_chain(index, parent, seen | {name})
            if len(chain) > len(longest):
                longest = chain
    return [*longest, name]


def _walk(index: ConfigIndex, path: list[str]) -> str | None:
    current = path[-1]
    names = [index.combos.get(p, (p,))[0] for p in path]
    if current in path[:-1]:
        return "cycle: " + " \u2192 ".join(names)
    if len(path) > MAX_COMBO_DEPTH:
        return f"nesting deeper than {MAX_COMBO_DEPTH}: " + " \u2192 ".join(names)
    for ref in index.combos.get(current, ("", "", []))[2]:
        found = _walk(index, [*path, ref])
        if found is not None:
            return found
    return None


def validate_combo(  # noqa: C901
    data: dict[str, Any], check: Checker, index: ConfigIndex
) -> dict[str, Any]:
    check.unknown_keys(data, COMBO_KEYS)
    name = check.string(data, "name", required=True, pattern=COMBO_NAME, max_len=64)
    if name is not None and name.lower() in RESERVED:
        check.error("name", f"'{name}' is reserved")
    strategy = canonical_strategy(data.get("strategy", "priority"))
    if strategy is None:
        check.error("strategy", f"unknown strategy '{data.get('strategy')}'")
        strategy = "priority"
    targets_in = data.get("targets", [])
    targets: list[dict[str, Any]] = []
    if not isinstance(targets_in, list):
        check.error("targets", "must be a list")
        targets_in = []
    low = 0 if strategy == "auto" else 1
    if not low <= len(targets_in) <= MAX_TARGETS:
        check.error("targets", f"must hold {low}..{MAX_TARGETS} targets")
    seen: set[str] = set()
    for position, item in enumerate(targets_in):
        sub = Checker(check.path(f"targets[{position}]"))
        target = _validate_target(item, sub, index, strategy)
        if target is not None and not sub.problems:
            key = _target_key(target)
            if key in seen:
                sub.error("", f"duplicate target {key}")
            seen.add(key)
        check.problems += sub.problems
        if target is not None:
            targets.append(target)
    config = validate_config(data.get("config"), strategy, check, index, len(targets))
    if name is not None and name.lower() in index.combos and not check.problems:
        found = reference_problem(index, name, targets)
        if found is not None:
            position, message = found
            check.error(f"targets[{position}].combo", message)
    if name is not None:
        owner = index.bare_model_owner(name)
        if owner is not None:
            check.warn(
                "name", f"COMBO_NAME_SHADOWS_MODEL: {name} ({owner[0]}/{owner[1]})"
            )
    return {
        "name": name,
        "strategy": strategy,
        "active": check.boolean(data, "active", True),
        "targets": targets,
        "config": config,
    }
