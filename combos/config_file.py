"""Configuration as code: ``import_config`` and ``export_config`` (spec 07).

Import is all-or-nothing: the whole file is validated first (every problem reported
with its YAML path), then everything is upserted by natural key in one transaction
and the config revision is bumped once — only when something changed, so running the
same file twice is a no-op.  ``prune`` also deletes rows of the kinds the file lists
but does not name.  Export writes the same format with secrets as ``env:`` references
or ``"***"``, never in clear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.db import transaction

from combos import change_history, services
from combos.combo_validation import reference_problem
from combos.config_apply import ImportReport, apply_plan
from combos.config_prune import prune_problems
from combos.key_validation import (
    validate_mapping,
    validate_override,
    validate_smart_route,
)
from combos.settings_validation import validate_settings
from providers.connection_recheck import stored_connection_problems
from providers.models import Provider
from providers.validation import (
    UNSTORABLE_MESSAGE,
    Checker,
    ConfigIndex,
    Problem,
    unstorable_path,
    validate_provider,
)

TOP_LEVEL = (
    "providers",
    "combos",
    "model_combo_mappings",
    "api_keys",
    "candidate_overrides",
    "smart_routes",
    "settings",
)
#: the fields naming a row of each section; a second item with the same values is an
#: error (it would overwrite the first, and a second import would do it again)
NATURAL_KEYS = {
    "providers": ("slug",),
    "combos": ("name",),
    "model_combo_mappings": ("pattern", "combo"),
    "api_keys": ("name",),
    "candidate_overrides": ("channel", "api_key"),
    "smart_routes": ("alias",),
}
#: natural-key fields compared ignoring case (they are matched that way on write)
FOLDED_KEYS = {
    ("providers", "slug"),
    ("combos", "name"),
    ("model_combo_mappings", "combo"),
}


@dataclass(slots=True)
class ImportPlan:
    data: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


class ConfigFileError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class _Loader(yaml.SafeLoader):
    """YAML 1.1 minus its extra booleans: only true/false are booleans, so the
    ``on:`` key of ``failover_defaults`` (spec 02 §13) stays a string and a
    ``yes``/``no`` value is rejected instead of silently becoming a bool.  A key
    given twice in one mapping is an error (the later one would silently win)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} is given twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        """A value its tag cannot hold (an unquoted ``2024-02-30`` is a date that
        does not exist, ``!!int x``) is a YAML error at its line, not a traceback."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError, AttributeError) as exc:
            shown = f"{node.value!r} " if isinstance(node.value, str) else ""
            why = f": {exc}" if isinstance(exc, ValueError) else ""
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"the value {shown}is not a valid {str(node.tag).rpartition(':')[2]}"
                f"{why} (quote it to keep it as text)",
                node.start_mark,
            ) from exc


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load_yaml(text: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigFileError([Problem("", f"not valid YAML: {exc}")]) from exc
    except RecursionError:
        raise ConfigFileError(
            [Problem("", "not valid YAML: nested too deeply")]
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError([Problem("", "the file must be a mapping of sections")])
    bad = unstorable_path(data)
    if bad is not None:  # a problem with its path, not a database traceback
        raise ConfigFileError([Problem(bad, UNSTORABLE_MESSAGE)])
    return data


def _section(data: dict[str, Any], name: str, check: Checker) -> list[Any]:
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        check.error(name, "must be a list")
        return []
    return value


def _walk(items: list[Any], name: str, check: Checker, fn: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], int] = {}
    keys = NATURAL_KEYS.get(name, ())
    for position, item in enumerate(items):
        sub = Checker(f"{name}[{position}]")
        if not isinstance(item, dict):
            sub.error("", "must be a mapping")
        else:
            clean = fn(item, sub)
            ident = tuple(clean.get(key) for key in keys)
            if keys and all(isinstance(part, str) for part in ident):
                folded = tuple(
                    part.lower() if (name, key) in FOLDED_KEYS else part
                    for key, part in zip(keys, ident, strict=True)
                )
                if folded in seen:
                    sub.error(keys[0], f"duplicate of {name}[{seen[folded]}]")
                seen[folded] = position
            out.append(clean)
        check.problems += sub.problems
        check.warnings += sub.warnings
    return out


def _kept_connection_problems(
    raw: Any, providers: list[dict[str, Any]]
) -> list[Problem]:
    """The stored connections a file's provider keeps without naming them, checked
    against the kind and settings it gives that provider (issue #14)."""
    if not isinstance(raw, list):
        return []
    positions = [i for i, item in enumerate(raw) if isinstance(item, dict)]
    problems: list[Problem] = []
    for position, item in zip(positions, providers, strict=False):
        slug = item.get("slug")
        if not isinstance(slug, str) or item.get("kind") is None:
            continue
        stored = Provider.objects.filter(slug__iexact=slug).first()
        if stored is not None:
            problems += stored_connection_problems(
                stored,
                kind=item["kind"],
                settings=item["settings"],
                base=f"providers[{position}]",
                skip={c.get("name") for c in item["connections"]},
            )
    return problems


def _index_for(
    data: dict[str, Any], providers: list[dict[str, Any]], prune: bool
) -> ConfigIndex:
    index = services.build_index()
    if prune and "providers" in data:
        index.providers = {}
    if prune and "combos" in data:
        index.combos = {}
    if prune and "api_keys" in data:
        index.api_keys = set()
    if prune and "smart_routes" in data:
        index.smart_aliases, index.smart_targets = set(), {}
    for provider in providers:
        slug = provider.get("slug")
        if not isinstance(slug, str):
            continue
        old = index.providers.get(slug.lower(), (slug, set(), set()))
        conns = {c["name"] for c in provider["connections"] if c.get("name")}
        models = {m["id"] for m in provider["models"] if m.get("id")}
        models |= {
            c["default_model"]
            for c in provider["connections"]
            if c.get("default_model")
        }
        keep = not prune
        index.providers[slug.lower()] = (
            slug,
            (old[1] if keep else set()) | conns,
            (old[2] if keep else set()) | models,
        )
    return index


def plan_import(text: str, *, prune: bool = False) -> ImportPlan:
    """Validate a whole file; nothing is written."""
    data = load_yaml(text)
    plan = ImportPlan()
    top = Checker("")
    for key in data:
        if key not in TOP_LEVEL:
            top.error(
                str(key), f"unknown section (expected one of {', '.join(TOP_LEVEL)})"
            )
    providers = _walk(
        _section(data, "providers", top), "providers", top, validate_provider
    )
    if not prune:  # with prune the connections the file does not name go
        top.problems += _kept_connection_problems(data.get("providers"), providers)
    index = _index_for(data, providers, prune)
    combos_raw = _section(data, "combos", top)
    for item in combos_raw:  # overlay every combo of the file before checking refs
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            targets = item.get("targets")
            refs = [
                str(t["combo"]).lower()
                for t in (targets if isinstance(targets, list) else [])
                if isinstance(t, dict) and isinstance(t.get("combo"), str)
            ]
            index.combos[item["name"].lower()] = (
                item["name"],
                str(item.get("strategy", "")),
                refs,
            )
    combos = _walk(
        combos_raw,
        "combos",
        top,
        lambda item, sub: services.validate_combo(item, sub, index),
    )
    _graph_check(combos, top, index)
    keys_raw = _section(data, "api_keys", top)
    index.api_keys |= {
        k["name"]
        for k in keys_raw
        if isinstance(k, dict) and isinstance(k.get("name"), str)
    }
    file_aliases = {
        r["alias"]
        for r in _section(data, "smart_routes", top)
        if isinstance(r, dict) and isinstance(r.get("alias"), str)
    }
    for alias in file_aliases:  # the file's version replaces the stored one
        index.drop_smart_route(alias)
    index.smart_aliases |= file_aliases
    if prune and "model_combo_mappings" in data:
        index.mapping_patterns = set()
    index.mapping_patterns |= {
        m["pattern"]
        for m in _section(data, "model_combo_mappings", top)
        if isinstance(m, dict) and isinstance(m.get("pattern"), str)
    }
    if prune and not top.problems:
        top.problems += prune_problems(data, index)
    plan.data = {
        "providers": providers,
        "combos": combos,
        "model_combo_mappings": _walk(
            _section(data, "model_combo_mappings", top),
            "model_combo_mappings",
            top,
            lambda item, sub: validate_mapping(item, sub, index),
        ),
        "api_keys": _walk(keys_raw, "api_keys", top, _key_checker(index)),
        "candidate_overrides": _walk(
            _section(data, "candidate_overrides", top),
            "candidate_overrides",
            top,
            lambda item, sub: validate_override(item, sub, index),
        ),
        "smart_routes": _walk(
            _section(data, "smart_routes", top),
            "smart_routes",
            top,
            lambda item, sub: validate_smart_route(item, sub, index),
        ),
    }
    if "settings" in data:
        sub = Checker("settings")
        plan.data["settings"] = validate_settings(data["settings"], sub)
        top.problems += sub.problems
    plan.data["_present"] = [k for k in TOP_LEVEL if k in data]
    plan.problems, plan.warnings = top.problems, top.warnings
    return plan


def _key_checker(index: ConfigIndex) -> Any:
    """``validate_api_key`` plus the uniqueness of literal keys: within the file, and
    against the stored keys of other names (an import must fail with a path, not on
    the unique digest)."""
    seen: dict[str, str] = {}

    def check_key(item: dict[str, Any], sub: Checker) -> dict[str, Any]:
        clean = services.validate_api_key(item, sub, index)
        literal = services.literal_key(clean)
        if literal is None:
            return clean
        owner = services.key_owner(literal, other_than=clean["name"])
        if literal in seen:
            sub.error("key", f"duplicate of {seen[literal]}")
        elif owner is not None:
            sub.error("key", f"is already the key of API key '{owner}'")
        seen.setdefault(literal, sub.base)
        return clean

    return check_key


def _graph_check(
    combos: list[dict[str, Any]], check: Checker, index: ConfigIndex
) -> None:
    if check.problems:
        return
    for position, combo in enumerate(combos):
        name = combo.get("name")
        if isinstance(name, str) and name.lower() in index.combos:
            found = reference_problem(index, name, combo.get("targets") or [])
            if found is not None:
                check.problems.append(
                    Problem(f"combos[{position}].targets[{found[0]}].combo", found[1])
                )


def import_config(text: str, *, prune: bool = False, user: Any = None) -> ImportReport:
    """Validate, then apply in one transaction; raises ``ConfigFileError``.

    Each row added, changed or deleted is logged in its History as a
    ``config import`` by ``user`` (the ``config-import`` user when None)."""
    plan = plan_import(text, prune=prune)
    if plan.problems:
        raise ConfigFileError(plan.problems)
    with transaction.atomic():
        before = change_history.snapshot_all()
        report = apply_plan(plan.data, prune=prune)
        report.warnings = plan.warnings
        if report.changed:
            services.bump_config_revision()
            change_history.record(
                user if user is not None else change_history.import_user(),
                change_history.CONFIG_IMPORT,
                before,
                change_history.snapshot_all(),
            )
    return report
