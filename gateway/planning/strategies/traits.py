"""What a strategy declares about itself (spec 03 §2.2, §4, §5, §8; 05 §1.4, §3).

Every strategy, whether it orders targets or not, carries ``Traits``; the planner,
its batched reads, the session pins, the validators and the admin read them and hold
no list of strategy names of their own:

* ``family``: ``ordering`` (orders a combo's survivors, ``order()``), ``adaptive``
  (orders them over live latency, planned by ``gateway.planning.affinity``),
  ``composite`` (runs the combo as one unit, ``gateway.slots``) or ``auto`` (the auto
  engine, ``gateway.auto``);
* ``pin_capable``: a session keeps the target it was served by (05 §1.4);
* ``reads_stats``: reads the target stats of the last 10 minutes (03 §8.7), fetched
  in the plan's batch;
* ``expands``: always one candidate per connection (03 §4.1);
* ``record`` / ``session_record``: the strategy record ``state:<record>:<combo id>``
  (with ``:<S>``: one per session, only when there is a session);
* ``fills_first``: drains one connection before the next, inside a target too, so
  its connections are ordered by quota, never by the cache key (03 §5.2);
* ``rotates_expanded``: rotates over the expanded connections, not the configured
  targets, when the combo expands;
* ``relays``: hands a session's context to the next target (context-relay, 03 §5.17);
* ``reads_last_good``: its state is the combo's last-known-good records (03 §8.6);
* ``aliases``: other names accepted on input, stored canonical (03 §2.1);
* ``config``: the ``config`` keys it reads and the rule each value must meet;
* ``runner``: a composite strategy's module (its ``run(Composite)``, ``gateway.slots``);
* ``summary``: one plain line for the combo editor.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    ORDERING = "ordering"
    ADAPTIVE = "adaptive"
    COMPOSITE = "composite"
    AUTO = "auto"


class Rule(StrEnum):
    BOOLEAN = "boolean"
    INTEGER = "integer"
    NUMBER = "number"
    CHOICE = "choice"
    #: checked by the validator written for it (nested mappings, references)
    CUSTOM = "custom"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    """One ``config`` key a strategy reads, and what its value must be."""

    name: str
    rule: Rule = Rule.CUSTOM
    low: float | None = None
    high: float | None = None
    exclusive_low: bool = False
    exclusive_high: bool = False
    choices: tuple[str, ...] = ()
    default: bool = False


def boolean(name: str, default: bool) -> ConfigKey:
    return ConfigKey(name=name, rule=Rule.BOOLEAN, default=default)


def integer(name: str, low: int, high: int) -> ConfigKey:
    return ConfigKey(name=name, rule=Rule.INTEGER, low=low, high=high)


def number(
    name: str,
    low: float,
    high: float,
    *,
    exclusive_low: bool = False,
    exclusive_high: bool = False,
) -> ConfigKey:
    return ConfigKey(
        name=name,
        rule=Rule.NUMBER,
        low=low,
        high=high,
        exclusive_low=exclusive_low,
        exclusive_high=exclusive_high,
    )


def choice(name: str, *choices: str) -> ConfigKey:
    return ConfigKey(name=name, rule=Rule.CHOICE, choices=choices)


def custom(name: str) -> ConfigKey:
    return ConfigKey(name=name)


#: read by every ordering strategy (03 §4.1)
EXPANSION = boolean("connectionAwareExpansion", False)
#: read by every pin-capable strategy (05 §1.4)
SESSION_AFFINITY = boolean("sessionAffinity", True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Traits:
    #: one line for the admin's combo editor: what the strategy does, plainly
    summary: str = ""
    family: Family = Family.ORDERING
    pin_capable: bool = False
    reads_stats: bool = False
    expands: bool = False
    record: str | None = None
    session_record: bool = False
    fills_first: bool = False
    rotates_expanded: bool = False
    relays: bool = False
    reads_last_good: bool = False
    aliases: tuple[str, ...] = ()
    runner: str | None = None
    #: the keys this strategy reads beyond ``EXPANSION`` and ``SESSION_AFFINITY``,
    #: which its family and ``pin_capable`` imply
    config: tuple[ConfigKey, ...] = ()

    @property
    def config_keys(self) -> tuple[ConfigKey, ...]:
        """Every ``config`` key it reads."""
        implied = []
        if self.family is Family.ORDERING:
            implied.append(EXPANSION)
        if self.pin_capable:
            implied.append(SESSION_AFFINITY)
        return (*implied, *self.config)

    def record_key(self, combo_id: int, session_key: str | None) -> str | None:
        """``state:<record>:<combo>[:<S>]``; None: no record (or no session for a
        per-session one)."""
        if self.record is None:
            return None
        if not self.session_record:
            return f"state:{self.record}:{combo_id}"
        if session_key:
            return f"state:{self.record}:{combo_id}:{session_key}"
        return None
