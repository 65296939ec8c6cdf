"""Arena name -> model id (spec 06 §3.3), for ``sync_arena_elo`` and the alias admin.

The first rule that yields a known model id wins:

1. the ``ArenaAlias`` of the exact Arena name; its value ``ignore`` stops here
   (unmatched), an id that is not known falls through to the next rules;
2. the normalised name: lower-case, trim, strip one leading ``<vendor>/``, spaces
   -> ``-``;
3. the normalised name without a trailing ``-YYYYMMDD`` or ``-YYYY-MM-DD``.

Nothing else matches: no prefix or fuzzy matching, so effort and thinking variants
(``-high``, ``-thinking``, ``-high-32k``) reach a base model only through an alias.

Where the spec is silent: the known ids are the ``CatalogModel`` ids *and* the
configured ``ProviderModel`` ids (the auto engine asks by configured id, which need
not be in the models.dev catalog), compared case-insensitively; the configured
spelling is stored when both exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from providers.models import ArenaAlias, ArenaScore, CatalogModel, ProviderModel

_TRAILING_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def normalise(name: str) -> str:
    """Lower-case, trim, strip one leading ``<vendor>/``, spaces -> ``-``."""
    text = name.lower().strip()
    _vendor, slash, rest = text.partition("/")
    if slash:
        text = rest.strip()
    return text.replace(" ", "-")


def strip_date(name: str) -> str:
    """``name`` without a trailing ``-YYYYMMDD`` or ``-YYYY-MM-DD``."""
    return _TRAILING_DATE.sub("", name)


@dataclass(frozen=True, slots=True)
class Matcher:
    """Arena name -> known model id (the rules of the module docstring)."""

    aliases: Mapping[str, str]  # exact Arena name -> model id or "ignore"
    known: Mapping[str, str]  # lower-cased model id -> model id

    def match(self, name: str) -> str | None:
        alias = self.aliases.get(name)
        if alias == ArenaAlias.IGNORE:
            return None
        if alias is not None and alias.lower() in self.known:
            return self.known[alias.lower()]
        plain = normalise(name)
        for candidate in (plain, strip_date(plain)):
            if candidate in self.known:
                return self.known[candidate]
        return None


def known_ids(catalog: Iterable[str], configured: Iterable[str]) -> dict[str, str]:
    """lower-cased id -> id; a configured spelling wins over the catalog's."""
    found = {model_id.lower(): model_id for model_id in sorted(set(catalog))}
    found.update({model_id.lower(): model_id for model_id in sorted(set(configured))})
    return found


def load_matcher() -> Matcher:
    return Matcher(
        aliases=dict(ArenaAlias.objects.values_list("arena_name", "model_id")),
        known=known_ids(
            CatalogModel.objects.values_list("model_id", flat=True),
            ProviderModel.objects.values_list("model_id", flat=True),
        ),
    )


@transaction.atomic
def rematch(*, now: datetime | None = None) -> int:
    """Re-run name matching on the unexpired rows (after staff change an alias);
    returns how many rows changed their match."""
    matcher = load_matcher()
    changed = 0
    rows = ArenaScore.objects.filter(expires_at__gt=now or timezone.now())
    for pk, name, current in rows.values_list("pk", "model_name", "matched_model"):
        matched = matcher.match(name)
        if matched != current:
            ArenaScore.objects.filter(pk=pk).update(matched_model=matched)
            changed += 1
    return changed
