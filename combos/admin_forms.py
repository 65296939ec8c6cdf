"""Admin forms: the shared helpers, the combo editor and the candidate override form.

Every form runs the shared validator in ``clean()`` and errors land on the field they
name.

The combo editor shows each ``config`` key of spec 03 §2.2 and 05 §3.7 as its own
``cfg_…`` field ("Strategy options"); the widget of each carries the key it edits
(``data-config-key``, dotted for ``fusionTuning.*`` and ``agenticOrchestration.*``)
and the strategies that read it (``data-strategies``, from ``CONFIG_USERS`` of the
validator), which ``combo_editor.js`` uses to show only the chosen strategy's fields.
Without JavaScript every field shows. The JSON textarea ("Other config") holds the
keys without a field (``auto``, ``routerStrategy``) and anything it cannot represent.

- Load: a stored key moves into its field and out of the JSON shown, unless it is
  null or (``stagePrompts``) would not survive the one-prompt-per-line round trip.
- Save: start from the JSON object; every non-empty field whose key the chosen
  strategy reads (``CONFIG_USERS``, so ``connectionAwareExpansion`` only for
  ordering strategies and ``sessionAffinity`` only for pin-capable ones) sets that
  key, overriding the JSON and creating the nested object when needed. An empty
  field leaves the key to the JSON, absent meaning its default. A field value for a
  key the strategy does not read is never saved (the save reports it), so values in
  fields hidden after switching strategies are dropped rather than stored unused.
- Errors: a validator path of a key that came from a field (``config.tieBand``,
  ``config.fusionTuning.minPanel``) lands on that field, any other ``config`` path on
  the JSON textarea.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any, TypeVar, cast

from django import forms
from django.apps import apps
from django.utils import timezone

from combos import services
from combos.combo_validation import (
    BUDGET_FALLBACKS,
    CONFIG_USERS,
    ORDERING,
    PIN_CAPABLE,
)
from combos.models import CandidateOverride, Combo
from gateway.auto.engine.routers import BUILTIN_NAMES as ROUTER_NAMES
from gateway.auto.engine.weights import MODE_PACKS
from gateway.kernel.autoids import CATEGORIES, TIERS, VARIANTS, parse_auto_id
from gateway.planning.strategies import SPECS as STRATEGY_SPECS
from providers.validation import Problem

TARGETS_HELP = (
    "One target per line, in order. A model target: provider/model[@connection] "
    "[weight=N] [timeout_ms=N]. A combo-ref: combo:NAME [weight=N]."
)


def _field_for(path: str, aliases: dict[str, str]) -> str:
    """The field of the longest alias that ``path`` starts with, else its head.

    An alias matches whole segments: ``config.fusionTuning`` matches
    ``config.fusionTuning.minPanel`` but not ``config.fusionTuningX``.
    """
    best = ""
    for alias in aliases:
        if len(alias) > len(best) and (
            path == alias or path.startswith((f"{alias}.", f"{alias}["))
        ):
            best = alias
    return aliases[best] if best else path.split(".")[0].split("[")[0]


def human_path(path: str) -> str:
    """A problem path as the admin shows it: rows numbered from 1 as on the page
    (``targets[0].model`` -> ``targets (row 1).model``)."""
    return re.sub(r"\[(\d+)\]", lambda m: f" (row {int(m.group(1)) + 1})", path)


def add_problems(
    form: forms.BaseForm, problems: list[Problem], aliases: dict[str, str] | None = None
) -> None:
    """Attach each problem to the form field its path (or a dotted alias) names."""
    djangos = set(form.errors)  # fields Django's own checks already flagged
    for problem in problems:
        field = _field_for(problem.path, aliases or {})
        if field in form.fields and field in djangos:
            continue  # Django's own message for the field says it already
        text = f"{human_path(problem.path)}: {problem.message}"
        # on the field that is exactly the key, the key's path says nothing more
        exact = problem.path == field or (aliases or {}).get(problem.path) == field
        if field in form.fields:
            form.add_error(field, problem.message if exact else text)
        else:
            form.add_error(None, text)


SHADOW_CODES = ("COMBO_NAME_SHADOWS_MODEL", "SMART_ALIAS_SHADOWS_MODEL")
SHADOW_WINDOW = timedelta(hours=24)
_SHADOWING = {
    "COMBO_NAME_SHADOWS_MODEL": "combo",
    "SMART_ALIAS_SHADOWS_MODEL": "smart route",
}


def console_text(problem: Problem) -> str:
    """A problem or warning as the console shows it: rows numbered from 1 and a
    shadowing warning in words, where the REST API and ``import_config`` keep the
    machine path and code (spec 07, 01)."""
    code, _, detail = problem.message.partition(": ")
    kind = _SHADOWING.get(code)
    if kind is None:
        if not problem.path:
            return problem.message
        return f"{human_path(problem.path)}: {problem.message}"
    name, _, rest = detail.partition(" (")
    provider, _, model = rest.rstrip(")").partition("/")
    what = f"the model {model} of {provider}" if provider else f"the live combo {model}"
    # in a file, the row says which one; on a form, the page does
    where = f"{human_path(problem.path)}: " if "[" in problem.path else ""
    return (
        f'{where}{kind.capitalize()} "{name}" has the same name as {what}: requests '
        f'for "{name}" go to this {kind} instead.'
    )


def confirm_shadow_field() -> forms.BooleanField:
    return forms.BooleanField(
        required=False,
        label="Save even if it shadows",
        help_text="A name that equals a live combo or a bare model id takes that "
        "name's requests from then on; tick to confirm you mean it.",
    )


def recent_requests_for(name: str) -> int:
    """Requests that asked for ``name`` in the last 24 h (the request log is read
    through the app registry: combos does not import telemetry)."""
    log = apps.get_model("telemetry", "RequestLog")
    since = timezone.now() - SHADOW_WINDOW
    return int(
        log.objects.filter(created_at__gte=since, requested_model__iexact=name).count()
    )


def require_shadow_confirmation(
    form: forms.BaseForm, warnings: list[Problem], *, previous_name: str | None
) -> None:
    """Issue #15 guard rail: saving a name that shadows a live combo or model needs
    the ``confirm_shadow`` box ticked; the error names what is shadowed and its last
    24 h of traffic.  Re-saving a row under its unchanged name needs no new tick."""
    shadows = [w for w in warnings if w.message.startswith(SHADOW_CODES)]
    if not shadows or form.cleaned_data.get("confirm_shadow"):
        return
    for warning in shadows:
        detail = warning.message.partition(": ")[2]  # "name (provider/model)"
        name, _, rest = detail.partition(" (")
        if previous_name is not None and previous_name.lower() == name.lower():
            continue
        owner = rest.rstrip(")")
        what = (
            f"the live combo {owner.lstrip('/')}"
            if owner.startswith("/")
            else f"the model {owner}"
        )
        count = recent_requests_for(name)
        form.add_error(
            "confirm_shadow",
            f'"{name}" is also {what}, which was asked for {count} time(s) in the '
            f'last 24 h: after saving, requests for "{name}" go here instead. '
            "Tick the box to save anyway.",
        )


def json_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        help_text=help_text,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
    )


def parse_json(form: forms.BaseForm, name: str) -> Any:
    text = (form.cleaned_data.get(name) or "").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        form.add_error(name, f"not valid JSON: {exc}")
        return None


def split_target(
    head: str, connections: Callable[[str], Collection[str]] | None = None
) -> tuple[str, str | None]:
    """``provider/model[@connection]`` -> (model, connection).  A model id may hold
    ``@`` (Vertex's ``claude-sonnet-4@20250514``), so the text after the last ``@``
    is the connection only when it is ``*`` (any) or names a connection of that
    provider (``connections(slug)``; without it, any text does); otherwise the
    whole head is the model."""
    model, at, connection = head.rpartition("@")
    if not at or not model:
        return head, None
    if connection == "*":
        return model, None
    slug = model.partition("/")[0]
    if connections is None or connection in connections(slug):
        return model, connection
    return head, None


def parse_target_line(
    line: str, connections: Callable[[str], Collection[str]] | None = None
) -> dict[str, Any]:
    head, *options = line.split()
    target: dict[str, Any] = {}
    if head.lower().startswith("combo:"):
        target["combo"] = head[len("combo:") :]
    else:
        model, connection = split_target(head, connections)
        target["model"] = model
        if connection:
            target["connection"] = connection
    for option in options:
        name, _, value = option.partition("=")
        try:
            target[name] = json.loads(value)
        except json.JSONDecodeError:
            target[name] = value
    return target


def format_targets(data: list[dict[str, Any]]) -> str:
    lines = []
    for target in data:
        if "combo" in target:
            head = f"combo:{target['combo']}"
        else:
            # a model id holding "@" gets an explicit "@*", so it reads back whole
            suffix = "@*" if "@" in target["model"] else ""
            head = target["model"] + (
                f"@{target['connection']}" if target.get("connection") else suffix
            )
        extras = [f"{k}={target[k]}" for k in ("weight", "timeout_ms") if k in target]
        lines.append(" ".join([head, *extras]))
    return "\n".join(lines)


FieldT = TypeVar("FieldT", bound=forms.Field)
CONFIG_KEY_ATTR = "data-config-key"
MISSING = object()


def _readers(users: frozenset[str]) -> str:
    if users == ORDERING:
        return "every ordering strategy"
    if users == PIN_CAPABLE:
        return "pin-capable strategies (" + ", ".join(sorted(users)) + ")"
    return ", ".join(sorted(users))


def _config_field(field: FieldT, path: str, text: str) -> FieldT:
    """Mark ``field`` as the editor of ``config`` key ``path`` (see the docstring)."""
    users = CONFIG_USERS[path.partition(".")[0]]
    field.required = False
    field.label = path
    field.help_text = f"{text} Read by {_readers(users)}."
    field.widget.attrs.update(
        {CONFIG_KEY_ATTR: path, "data-strategies": " ".join(sorted(users))}
    )
    return field


def _int(path: str, low: int, high: int, default: str) -> forms.IntegerField:
    text = f"Integer {low}..{high}; empty = {default}."
    return _config_field(forms.IntegerField(), path, text)


def _number(path: str, bounds: str, default: str) -> forms.FloatField:
    text = f"Number {bounds}; empty = {default}."
    return _config_field(forms.FloatField(), path, text)


def _is_true(value: str) -> bool:
    return value == "true"


def _flag(path: str, default: str) -> forms.TypedChoiceField:
    """Three states: empty (the key stays absent, the default applies), true, false."""
    choices = [("", f"default ({default})"), ("true", "true"), ("false", "false")]
    field = forms.TypedChoiceField(choices=choices, coerce=_is_true, empty_value=None)
    return _config_field(field, path, f"true or false; empty = {default}.")


def prompts_from_text(text: str) -> list[str | None] | None:
    """One stage prompt per line; a blank line is a stage without a prompt."""
    prompts: list[str | None] = [
        line if line.strip() else None for line in text.splitlines()
    ]
    while prompts and prompts[-1] is None:
        prompts.pop()
    return prompts or None


def _prompts_to_text(prompts: list[str | None]) -> str | None:
    """The textarea text for ``prompts``, or None when lines cannot express them."""
    text = "\n".join(p or "" for p in prompts)
    return text if prompts_from_text(text) == prompts else None


def _initial(value: Any) -> Any:
    """A stored ``config`` value as its field's initial value (None: keep in JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return _prompts_to_text(value)
    return value


def _lookup(config: dict[str, Any], path: str) -> Any:
    head, _, leaf = path.partition(".")
    value = config.get(head, MISSING)
    if not leaf:
        return value
    return value.get(leaf, MISSING) if isinstance(value, dict) else MISSING


def _remove(config: dict[str, Any], path: str) -> None:
    head, _, leaf = path.partition(".")
    if not leaf:
        del config[head]
        return
    del config[head][leaf]
    if not config[head]:
        del config[head]


def _assign(config: dict[str, Any], path: str, value: Any) -> None:
    head, _, leaf = path.partition(".")
    if not leaf:
        config[head] = value
        return
    nested = config.setdefault(head, {})
    if isinstance(nested, dict):  # otherwise the validator reports config.<head>
        nested[leaf] = value


class ComboForm(forms.ModelForm):
    confirm_shadow = confirm_shadow_field()
    targets_text = forms.CharField(
        label="Targets",
        required=False,
        help_text=TARGETS_HELP,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
    )
    cfg_connectionAwareExpansion = _flag(
        "connectionAwareExpansion", "settings.connection_aware_expansion (false)"
    )
    cfg_sessionAffinity = _flag("sessionAffinity", "true")
    cfg_stickyRoundRobinLimit = _int(
        "stickyRoundRobinLimit", 1, 1000, "settings.sticky_round_robin_limit (3)"
    )
    cfg_stickyWeightedLimit = _int("stickyWeightedLimit", 1, 1000, "1 (off)")
    cfg_fillFirstReservePercent = _number("fillFirstReservePercent", "0..50", "0")
    cfg_tieBand = _number("tieBand", "0..0.5", "0.05")
    cfg_resetWindowTieBandMs = _int("resetWindowTieBandMs", 0, 3_600_000, "60000")
    cfg_handoffThreshold = _number("handoffThreshold", "0 < x < 0.95", "0.85")
    cfg_maxMessagesForSummary = _int("maxMessagesForSummary", 5, 100, "30")
    cfg_judgeModel = _config_field(
        forms.CharField(),
        "judgeModel",
        "A provider/model or a combo name; empty = the first panel member.",
    )
    cfg_fusion_minPanel = _int("fusionTuning.minPanel", 1, 16, "2")
    cfg_fusion_stragglerGraceMs = _int(
        "fusionTuning.stragglerGraceMs", 0, 120_000, "8000"
    )
    cfg_fusion_panelHardTimeoutMs = _int(
        "fusionTuning.panelHardTimeoutMs", 1000, 300_000, "90000"
    )
    cfg_stagePrompts = _config_field(
        forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 4})),
        "stagePrompts",
        "One system prompt per stage, one per line, in target order (a blank line: "
        "no prompt for that stage); at most one per target. Empty = none. A prompt "
        "spanning lines goes in Other config.",
    )
    cfg_agentic_enabled = _flag("agenticOrchestration.enabled", "false")
    cfg_agentic_maxToolRounds = _int("agenticOrchestration.maxToolRounds", 1, 32, "8")
    cfg_objective = _config_field(
        forms.ChoiceField(
            choices=[
                ("", "default (settings.adaptive.objective, balanced)"),
                ("latency", "latency"),
                ("cost", "cost"),
                ("balanced", "balanced"),
            ]
        ),
        "objective",
        "Overrides the gateway objective for this combo.",
    )
    # issue #15: the auto strategy's options (spec 04 §2.1) as fields
    cfg_auto_modePack = _config_field(
        forms.ChoiceField(
            choices=[("", "default (the route's weights)")]
            + [(name, name) for name in MODE_PACKS]
        ),
        "auto.modePack",
        "A weight pack that replaces the scoring weights.",
    )
    cfg_auto_routerStrategy = _config_field(
        forms.ChoiceField(
            choices=[("", "default (rules)")] + [(name, name) for name in ROUTER_NAMES]
        ),
        "auto.routerStrategy",
        "How the candidates are ranked.",
    )
    cfg_auto_budgetCap = _number(
        "auto.budgetCap", "> 0, USD per request (estimated)", "no cap"
    )
    cfg_auto_budgetFallback = _config_field(
        forms.ChoiceField(
            choices=[("", "default (cheapest)")]
            + [(name, name) for name in BUDGET_FALLBACKS]
        ),
        "auto.budgetFallback",
        "What happens when no candidate fits the cap.",
    )
    cfg_auto_explorationRate = _number(
        "auto.explorationRate", "0..1", "settings.exploration_rate (0.05)"
    )
    cfg_auto_maxAttempts = _int("auto.maxAttempts", 1, 10, "3")
    cfg_auto_preferTier = _config_field(
        forms.ChoiceField(
            choices=[
                ("", "default (none)"),
                ("free", "free"),
                ("cheap", "cheap"),
                ("premium", "premium"),
            ]
        ),
        "auto.preferTier",
        "A tier hint for the ranking.",
    )
    config_text = json_field(
        "Other config",
        "A JSON object with the keys that have no field above, camelCase (spec 03 "
        "§2.2, 04 for auto: auto, routerStrategy). A field above that is set "
        "overrides the same key here.",
    )

    class Meta:
        model = Combo
        fields = ("name", "strategy", "active")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # issue #15: each strategy with its one-line description (its Traits)
        strategy = self.fields.get("strategy")
        if isinstance(strategy, forms.ChoiceField):
            strategy.choices = [
                (name, f"{name}: {spec.traits.summary}")
                for name, spec in STRATEGY_SPECS.items()
            ]
            strategy.help_text = (
                "How the combo picks among its targets; 'priority' is plain failover."
            )
        self.config_fields = {
            name: str(field.widget.attrs[CONFIG_KEY_ATTR])
            for name, field in self.fields.items()
            if CONFIG_KEY_ATTR in field.widget.attrs
        }
        if self.instance.pk:
            data = services.combo_as_data(self.instance)
            self.fields["targets_text"].initial = format_targets(data["targets"])
            config = self._fill_config_fields(data["config"])
            self.fields["config_text"].initial = (
                json.dumps(config, indent=2) if config else ""
            )
        self.config_data: dict[str, Any] = {}
        self.warnings: list[Problem] = []
        self.ignored_keys: list[str] = []

    def _fill_config_fields(self, config: dict[str, Any]) -> dict[str, Any]:
        """Move each key with a field into it; return what is left for the JSON."""
        for name, path in self.config_fields.items():
            value = _lookup(config, path)
            if value is MISSING or value is None:
                continue
            initial = _initial(value)
            if initial is not None:
                self.fields[name].initial = initial
                _remove(config, path)
        return config

    def clean_cfg_stagePrompts(self) -> list[str | None] | None:
        return prompts_from_text(self.cleaned_data.get("cfg_stagePrompts") or "")

    def _merge_config(self, strategy: str | None) -> tuple[Any, dict[str, str]]:
        """The JSON object with the field values merged in (see the docstring), and
        the problem-path aliases of the keys the fields supplied."""
        config = parse_json(self, "config_text")
        config = {} if config is None else config
        aliases: dict[str, str] = {}
        self.ignored_keys = []
        if not isinstance(config, dict):
            return config, aliases  # the validator reports "config: must be a mapping"
        for name, path in self.config_fields.items():
            value = self.cleaned_data.get(name)
            if value is None or value == "":
                continue
            if strategy not in CONFIG_USERS[path.partition(".")[0]]:
                self.ignored_keys.append(path)
                continue
            _assign(config, path, value)
            aliases[f"config.{path}"] = name
        return config, aliases

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        lines = (cleaned.get("targets_text") or "").splitlines()
        config, aliases = self._merge_config(cleaned.get("strategy"))
        index = services.build_index()

        def connections(slug: str) -> set[str]:
            entry = index.providers.get(slug.lower())
            return entry[1] if entry is not None else set()

        data = {
            "name": cleaned.get("name"),
            "strategy": cleaned.get("strategy"),
            "active": bool(cleaned.get("active")),
            "targets": [
                parse_target_line(line, connections) for line in lines if line.strip()
            ],
            "config": config,
        }
        previous = self.instance.name if self.instance.pk else None
        _clean, check = services.check_combo(data, index, previous_name=previous)
        aliases.update(targets="targets_text", config="config_text")
        add_problems(self, check.problems, aliases)
        mark_bad_cells(self.fields["targets_text"], check.problems)
        self.config_data, self.warnings = data, check.warnings
        if not check.problems:
            require_shadow_confirmation(self, check.warnings, previous_name=previous)
        return cleaned


#: a target's key -> the targets editor's column that holds it
_TARGET_CELLS = {
    "model": "target",
    "combo": "target",
    "connection": "connection",
    "weight": "weight",
    "timeout_ms": "timeout_ms",
}
_TARGET_PATH = re.compile(r"targets\[(\d+)\](?:\.(\w+))?")


def mark_bad_cells(field: forms.Field, problems: list[Problem]) -> None:
    """Tell the targets editor which cell each target problem is about (row from 1,
    its column, the message), so it marks that cell alone (issue #15)."""
    cells = []
    for problem in problems:
        found = _TARGET_PATH.match(problem.path)
        if found is None:
            continue
        cells.append(
            {
                "row": int(found.group(1)) + 1,
                "cell": _TARGET_CELLS.get(found.group(2) or "", "target"),
                "message": problem.message,
            }
        )
    if cells:
        field.widget.attrs["data-bad-cells"] = json.dumps(cells)
    else:
        field.widget.attrs.pop("data-bad-cells", None)


#: The "Strategy options" fieldset, in declaration order.
CONFIG_FIELD_NAMES = tuple(
    name
    for name, field in ComboForm.base_fields.items()
    if CONFIG_KEY_ATTR in field.widget.attrs
)


# ------------------------------------------------------------------ overrides


def _is_canonical_channel(channel: str) -> bool:
    """Whether ``auto/<channel>`` is its own route id (``coding:floor`` is not)."""
    return parse_auto_id(f"auto/{channel}") == f"auto/{channel}"


def channel_choices() -> list[tuple[str, Any]]:
    """``auto`` and every suffix of a built-in route id (spec 04 §1.1), grouped.

    Only canonical suffixes are offered: ``floor`` is an alias of ``cheap`` and the
    variant ``coding`` already covers the category ``coding`` without a tier.
    """
    tiers = [t for t in TIERS if _is_canonical_channel(f"{CATEGORIES[0]}:{t}")]
    return [
        ("auto", "auto"),
        ("Variants", [(v, f"auto/{v}") for v in VARIANTS]),
        ("Categories", [(c, f"auto/{c}") for c in CATEGORIES if c not in VARIANTS]),
        (
            "Category:tier",
            [(f"{c}:{t}", f"auto/{c}:{t}") for c in CATEGORIES for t in tiers],
        ),
    ]


def _choice_values(choices: list[tuple[str, Any]]) -> set[str]:
    values: set[str] = set()
    for value, label in choices:
        if isinstance(label, list):
            values.update(v for v, _ in label)
        else:
            values.add(value)
    return values


class OverrideForm(forms.ModelForm):
    """One key's exclusions on one channel (spec 04 §2.3 F4).

    ``exclude_keys`` offers the candidate keys of the current catalog, grouped by
    provider; ``exclude_other`` takes any other key, one per line, so a stored key
    that is not (or no longer) in the catalog shows there and survives an edit. The
    stored list is the union: the checked keys, then the typed ones, without
    duplicates. ``channel`` is a plain value shown as a select, so an unexpected
    stored value stays visible and the validator, not the widget, reports it.
    """

    channel = forms.CharField(
        widget=forms.Select(),
        help_text="The built-in route this override applies to, written as its "
        "suffix after auto/ (coding, vision:free), or auto itself.",
    )
    exclude_keys = forms.MultipleChoiceField(
        label="Exclude",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Candidates this key never gets on this channel. Listed: each "
        "active connection × its provider's catalog models, plus a connection's "
        "default model without a catalog row.",
    )
    exclude_other = forms.CharField(
        label="Other keys",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Keys not listed above (an inactive connection, a model not yet "
        "in the catalog): one provider/model@connection per line.",
    )

    class Meta:
        model = CandidateOverride
        fields = ("api_key", "channel")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        channels = channel_choices()
        stored_channel = self.instance.channel if self.instance.pk else None
        if stored_channel and stored_channel not in _choice_values(channels):
            channels.insert(0, (stored_channel, f"{stored_channel} (not valid)"))
        cast(forms.Select, self.fields["channel"].widget).choices = channels
        groups = services.candidate_keys()
        exclude_keys = cast(forms.MultipleChoiceField, self.fields["exclude_keys"])
        exclude_keys.choices = [
            (slug, [(key, key) for key in keys]) for slug, keys in groups.items()
        ]
        listed = {key for keys in groups.values() for key in keys}
        stored = list(self.instance.exclude or []) if self.instance.pk else []
        exclude_keys.initial = [key for key in stored if key in listed]
        self.fields["exclude_other"].initial = "\n".join(
            key for key in stored if key not in listed
        )
        self.config_data: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())
        source: dict[str, str] = {}
        for key in cleaned.get("exclude_keys") or []:
            source.setdefault(key, "exclude_keys")
        for line in (cleaned.get("exclude_other") or "").splitlines():
            if line.strip():
                source.setdefault(line.strip(), "exclude_other")
        key = cleaned.get("api_key")
        self.config_data = {
            "api_key": key.name if key else None,
            "channel": cleaned.get("channel"),
            "exclude": list(source),
        }
        check = services.Checker("")
        services.validate_override(self.config_data, check, services.build_index())
        rest = []
        for problem in check.problems:
            position = _exclude_position(problem.path)
            if position is None:
                rest.append(problem)
            else:  # name the key: a position in the union means nothing on the page
                item = self.config_data["exclude"][position]
                self.add_error(source[item], f"{item}: {problem.message}")
        add_problems(self, rest)
        return cleaned


def _exclude_position(path: str) -> int | None:
    """``exclude[3]`` -> 3; any other path -> None."""
    if path.startswith("exclude[") and path.endswith("]"):
        inner = path[len("exclude[") : -1]
        return int(inner) if inner.isascii() and inner.isdigit() else None
    return None
