"""The auto pipeline against spec 04: pool inputs and the candidates listing.

* §3.1: ``n_conn`` counts the *active usable* connections of the provider, so a
  connection without credentials does not raise ``connectionDensity``.
* §10: the candidates endpoint scores "the pool routing would score (reachable
  candidates that the key does not exclude, failing open as in F4)", so exclusions
  that cover the whole pool are ignored there too, and ``overrides_ignored`` says so.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from gateway.kernel.types import ConnectionInfo
from tests.routing.test_pipeline import A, B, C, env_for, pool_p_table, run


def _with_blank_connection():
    """Pool P, plus an openai connection whose secret is blank (not usable)."""
    table = pool_p_table()
    openai = table.providers["openai"]
    blank = ConnectionInfo(provider="openai", name="spare", api_key="  ", tier="pro")
    providers = dict(table.providers)
    providers["openai"] = dataclasses.replace(
        openai, connections=(*openai.connections, blank)
    )
    return dataclasses.replace(table, providers=MappingProxyType(providers))


async def test_connection_density_counts_only_usable_connections():
    table = _with_blank_connection()
    decision = await run("auto", table=table, env=env_for(table))
    keys = {s.key for s in decision.ranked}
    assert "openai/gpt-5-nano@spare" not in keys  # not a candidate (§2.1)
    factors = {s.key: s.factors for s in decision.ranked}
    assert factors[A]["connectionDensity"] == 0.0  # n_conn = 1, not 2


async def test_describe_scores_with_overrides_ignored_when_they_exclude_everything():
    table = pool_p_table()
    env = env_for(table, excluded=frozenset({A, B, C}))
    decision = await run("auto/coding", table=table, env=env, describe=True, body={})
    assert decision.filtered is not None
    assert decision.filtered.overrides_ignored is True
    assert [s.key for s in decision.eligible] == [B, C, A]


async def test_describe_flags_a_partial_exclusion_without_ignoring_it():
    table = pool_p_table()
    env = env_for(table, excluded=frozenset({B}))
    decision = await run("auto/coding", table=table, env=env, describe=True, body={})
    assert decision.filtered is not None
    assert decision.filtered.overrides_ignored is False
    assert B not in [s.key for s in decision.eligible]
    # the listing still holds the excluded candidate, to flag it
    assert B in [t.key for t in decision.filtered.fitting]
